/* src/pg/spi_rows.hpp — reading the last SPI result, for the queue's C++.
 *
 * Small helpers over SPI_tuptable (1-based columns, like SPI). Values are
 * copied into the current memory context, so they outlive the next
 * statement; the caller must be connected to SPI.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::spi {

/* A job id list copied out of SPI_tuptable, so later statements can run. */
struct IdList {
	int64 *ids;
	char **labels; /* optional second text column, NULL if absent */
	uint64 count;
};

inline Datum
Col(uint64 row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

inline int64
ColInt64(uint64 row, int col)
{
	bool isnull;
	Datum d = Col(row, col, &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

inline bool
ColBool(uint64 row, int col)
{
	bool isnull;
	Datum d = Col(row, col, &isnull);
	return !isnull && DatumGetBool(d);
}

/* ColText answers a palloc'd copy of a text column, or NULL. */
inline char *
ColText(uint64 row, int col)
{
	bool isnull;
	Datum d = Col(row, col, &isnull);
	return isnull ? nullptr : TextDatumGetCString(d);
}

/* CopyIds copies column 1 (bigint) and, if with_label, column 2 (text) of
 * the last result. */
inline IdList
CopyIds(uint64 n, bool with_label)
{
	IdList list{static_cast<int64 *>(palloc(sizeof(int64) * (n + 1))),
	            with_label ? static_cast<char **>(palloc(sizeof(char *) * (n + 1))) : nullptr, n};
	for (uint64 i = 0; i < n; i++) {
		list.ids[i] = ColInt64(i, 1);
		if (with_label)
			list.labels[i] = ColText(i, 2);
	}
	return list;
}

inline Datum
TextOrNull(const char *s, char *null_flag)
{
	*null_flag = s ? ' ' : 'n';
	return s ? CStringGetTextDatum(s) : Datum(0);
}

inline Datum
Int8Array(const int64 *ids, int n)
{
	Datum *elems = static_cast<Datum *>(palloc(sizeof(Datum) * (n + 1)));
	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(ids[i]);
	return PointerGetDatum(construct_array(elems, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

} // namespace pqrun::spi
