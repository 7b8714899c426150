/* src/api/batch_input.cpp — JSON objects of enqueue_batch → enqueue arguments.
 *
 * Keys are enqueue's argument names; a JSON null means "use the default",
 * as an absent key does. Errors name the element (1-based) and the key.
 */
#include "api/batch_input.hpp"

#include "pg/boundary.hpp"

namespace pqrun::batch {

namespace {

const char *const kKeys[jobs::kEnqueueArgCount] = {
    "job_type",   "payload", "priority",   "run_after", "max_attempts",    "timeout_seconds",
    "dedupe_key", "queue",   "depends_on", "fifo_key",  "concurrency_key", "rate_weight"};

void
ExpectType(const JsonbValue &value, enum jbvType type, int element, const char *key, const char *type_name)
{
	if (value.type != type)
		RaiseInvalid(psprintf("\"%s\" must be %s", key, type_name), element);
}

/* RequireIntegral rejects a JSON number with a fractional part or an
 * exponent instead of letting the cast round it. */
void
RequireIntegral(Numeric number, int element, const char *key, const char *what)
{
	const char *text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(number)));
	if (strpbrk(text, ".eE") != nullptr)
		RaiseInvalid(psprintf("\"%s\" must be %s, not %s", key, what, text), element);
}

/* AsInvalid runs the conversion `convert` and raises what it raises (an
 * integer out of range, a malformed timestamp) as 22023 naming the element
 * and key, as every other bad element is reported. The statement fails
 * either way: the error is only re-labelled. */
template <typename Convert>
Datum
AsInvalid(int element, const char *key, Convert convert)
{
	MemoryContext context = CurrentMemoryContext;
	volatile Datum result = Datum(0);
	ErrorData *volatile edata = nullptr;
	PG_TRY();
	{
		result = convert();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		FlushErrorState();
	}
	PG_END_TRY();
	if (edata != nullptr)
		RaiseInvalid(psprintf("\"%s\": %s", key, edata->message), element);
	return result;
}

Datum
NumericToInt4(const JsonbValue &value, int element, const char *key)
{
	ExpectType(value, jbvNumeric, element, key, "an integer");
	RequireIntegral(value.val.numeric, element, key, "an integer");
	Numeric number = value.val.numeric;
	return AsInvalid(element, key, [number] { return DirectFunctionCall1(numeric_int4, NumericGetDatum(number)); });
}

Datum
StringToText(const JsonbValue &value, int element, const char *key)
{
	ExpectType(value, jbvString, element, key, "a string");
	return PointerGetDatum(cstring_to_text_with_len(value.val.string.val, value.val.string.len));
}

Datum
ToTimestamptz(const JsonbValue &value, int element, const char *key)
{
	ExpectType(value, jbvString, element, key, "a timestamp string");
	char *text = pnstrdup(value.val.string.val, value.val.string.len);
	return AsInvalid(element, key, [text] {
		return DirectFunctionCall3(timestamptz_in, CStringGetDatum(text), ObjectIdGetDatum(InvalidOid),
		                           Int32GetDatum(-1));
	});
}

Datum
ToInt8Array(const JsonbValue &value, int element, const char *key)
{
	if (value.type != jbvBinary || !JsonContainerIsArray(value.val.binary.data))
		RaiseInvalid(psprintf("\"%s\" must be an array of job ids", key), element);
	JsonbContainer *container = value.val.binary.data;
	int n = JsonContainerSize(container);
	Datum *ids = static_cast<Datum *>(palloc(sizeof(Datum) * (n + 1)));
	for (int i = 0; i < n; i++) {
		JsonbValue *item = getIthJsonbValueFromContainer(container, i);
		if (item == nullptr || item->type != jbvNumeric)
			RaiseInvalid(psprintf("\"%s\" must be an array of job ids", key), element);
		RequireIntegral(item->val.numeric, element, key, "an array of job ids");
		Numeric number = item->val.numeric;
		ids[i] =
		    AsInvalid(element, key, [number] { return DirectFunctionCall1(numeric_int8, NumericGetDatum(number)); });
	}
	return PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

Datum
Convert(int arg, const JsonbValue &value, int element)
{
	const char *key = kKeys[arg];
	switch (arg) {
	case jobs::kPayload:
		return JsonbPGetDatum(JsonbValueToJsonb(const_cast<JsonbValue *>(&value)));
	case jobs::kPriority:
	case jobs::kMaxAttempts:
	case jobs::kTimeoutSeconds:
	case jobs::kRateWeight:
		return NumericToInt4(value, element, key);
	case jobs::kRunAfter:
		return ToTimestamptz(value, element, key);
	case jobs::kDependsOn:
		return ToInt8Array(value, element, key);
	default:
		return StringToText(value, element, key);
	}
}

} // namespace

void
Begin(Jsonb *jobs, JobCursor *cursor)
{
	if (!JB_ROOT_IS_ARRAY(jobs) || JB_ROOT_IS_SCALAR(jobs))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("jobs must be a JSON array of objects")));
	cursor->it = JsonbIteratorInit(&jobs->root);
	cursor->element = 0;
	jobs::SetEnqueueDefaults(&cursor->defaults);
	JsonbValue value;
	(void)JsonbIteratorNext(&cursor->it, &value, true); /* WJB_BEGIN_ARRAY */
}

LockKeys
LockKeysOf(Jsonb *jobs)
{
	uint32 size = JsonContainerSize(&jobs->root);
	LockKeys keys{static_cast<char **>(palloc(sizeof(char *) * (size + 1))), 0,
	              static_cast<char **>(palloc(sizeof(char *) * (size + 1))), 0, false};
	for (uint32 i = 0; i < size; i++) {
		JsonbValue *element = getIthJsonbValueFromContainer(&jobs->root, i);
		if (element->type != jbvBinary || !JsonContainerIsObject(element->val.binary.data))
			continue;
		JsonbValue value;
		JsonbContainer *object = element->val.binary.data;
		if (getKeyJsonValueFromContainer(object, "fifo_key", 8, &value) && value.type == jbvString)
			keys.fifo_keys[keys.nfifo++] = pnstrdup(value.val.string.val, value.val.string.len);
		if (getKeyJsonValueFromContainer(object, "concurrency_key", 15, &value) && value.type == jbvString) {
			if (!getKeyJsonValueFromContainer(object, "queue", 5, &value) || value.type == jbvNull)
				keys.keyed_queues[keys.nkeyed++] = pstrdup(jobs::kDefaultQueue);
			else if (value.type == jbvString)
				keys.keyed_queues[keys.nkeyed++] = pnstrdup(value.val.string.val, value.val.string.len);
		}
		if (getKeyJsonValueFromContainer(object, "depends_on", 10, &value) && value.type != jbvNull)
			keys.has_dependencies = true;
	}
	return keys;
}

bool
Next(JobCursor *cursor, jobs::EnqueueArgs *args)
{
	JsonbValue value;
	JsonbIteratorToken token = JsonbIteratorNext(&cursor->it, &value, true);
	if (token != WJB_ELEM)
		return false;
	int element = ++cursor->element;
	if (value.type != jbvBinary || !JsonContainerIsObject(value.val.binary.data))
		RaiseInvalid("not a JSON object", element);

	*args = cursor->defaults;
	JsonbIterator *fields = JsonbIteratorInit(value.val.binary.data);
	JsonbValue key;
	JsonbIteratorToken field_token;
	while ((field_token = JsonbIteratorNext(&fields, &key, true)) != WJB_DONE) {
		if (field_token != WJB_KEY)
			continue;
		int arg = -1;
		for (int i = 0; i < jobs::kEnqueueArgCount && arg < 0; i++)
			if (strlen(kKeys[i]) == static_cast<size_t>(key.val.string.len) &&
			    strncmp(kKeys[i], key.val.string.val, key.val.string.len) == 0)
				arg = i;
		if (arg < 0)
			RaiseInvalid(psprintf("unknown key \"%.*s\"", key.val.string.len, key.val.string.val), element);
		JsonbValue field;
		(void)JsonbIteratorNext(&fields, &field, true); /* WJB_VALUE */
		if (field.type == jbvNull) {
			if (arg == jobs::kJobType)
				RaiseInvalid("job_type must not be null or empty", element);
			continue;
		}
		args->value[arg] = Convert(arg, field, element);
		args->isnull[arg] = false;
	}
	return true;
}

} // namespace pqrun::batch
