#!/usr/bin/env bash
# test/packages/monitoring.sh — monitoring/ (alert rules, Prometheus and
# prometheus-sql-exporter configurations, Grafana dashboard) with Debian's
# prometheus and prometheus-sql-exporter, against the cluster of PGHOST and
# PGPORT:
#
#   - promtool check rules / test rules (monitoring/prometheus/alerts_test.yml)
#     / check config of the example prometheus.yml;
#   - the Grafana dashboard parses, takes its data source from an input of
#     type prometheus, and names only metrics of pqrun.metrics();
#   - in a database of its own (jobs READY, a FAILED one, a DONE one, a
#     paused queue, a delayed job, an orphaned job), `SELECT pqrun.metrics()`
#     read by a monitor role (pqrun.grant_monitor) passes
#     `promtool check metrics` with no finding at all;
#   - end to end: prometheus-sql-exporter running monitoring/sql_exporter/
#     pqrun.yml as that role (run every 1 s), a stand-in for the dashboard's
#     /metrics (serving `SELECT pqrun.metrics()` as it is), and a real
#     Prometheus (scrape and rule evaluation every 1 s, its data in
#     PQRUN_WORK) running the example prometheus.yml with a copy of
#     alerts.yml whose `for:` durations are 1 s and whose oldest-READY
#     threshold is 1 s instead of 600 s (sed, each edit checked);
#     /api/v1/query gives through both scrape jobs the same series (name
#     and labels) and values, which match counts read from the database;
#     /api/v1/alerts shows PqrunOldestReadyTooOld firing for the backlog
#     queue and for no paused queue or delayed job; the rules Prometheus
#     loaded and every dashboard expression name only pqrun's metrics, and
#     every dashboard expression evaluates.
#   - the metrics 0.20.0 adds, typed as they should be, and their values
#     (enqueued, picked and errors of the last 5 minutes, rescues, shared
#     memory); PqrunQueueNotPickedUp and PqrunOrphanedJobsRescued firing for
#     real too;
#   - a queue name with a tab, a quote and a backslash: promtool check
#     metrics accepts metrics()'s text, and both scrape jobs give the name
#     as it is stored.
#
# Needs pqrun 0.21.0 or later installed.
#
# Ports: 54541 (exporter), 54542 (Prometheus), 54543 (stand-in). Stops what
# it started and drops its database and role. Budget: 3 minutes (about 15 s
# once the packages are installed).
# test/run.sh: stage "packages, clients and dashboard" (PQRUN_PACKAGES=1)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
mon=$repo/monitoring
source "$repo/test/lib/need_packages.sh"

need_packages prometheus prometheus-sql-exporter python3 || { echo "cannot install prometheus, prometheus-sql-exporter"; exit 77; }
[ -n "${PGHOST:-}" ] && [ -n "${PGPORT:-}" ] || { echo "PGHOST and PGPORT must name a running cluster with pqrun"; exit 77; }
export PGUSER=${PGUSER:-postgres} PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"

work=${PQRUN_WORK:-$(mktemp -d /tmp/pqrun-monitoring.XXXXXX)}/monitoring
rm -rf "$work" && mkdir -p "$work" || exit 1
db=pqrun_monitoring
role=pqrun_monitoring_reader
exporter_port=54541 prom_port=54542 standin_port=54543
pids=()
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
psql_su() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }

cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "DROP ROLE IF EXISTS $role" >/dev/null 2>&1
}
trap cleanup EXIT

for port in $exporter_port $prom_port $standin_port; do
	if (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null; then echo "port $port is in use"; exit 77; fi
done

# ---- Static checks --------------------------------------------------------

promtool check rules "$mon/prometheus/alerts.yml" >"$work/check_rules.log" 2>&1 &&
	ok "promtool check rules" || { cat "$work/check_rules.log"; fail "promtool check rules alerts.yml"; }
promtool test rules "$mon/prometheus/alerts_test.yml" >"$work/test_rules.log" 2>&1 &&
	ok "promtool test rules" || { cat "$work/test_rules.log"; fail "promtool test rules alerts_test.yml"; }
promtool check config "$mon/prometheus/prometheus.yml" >"$work/check_config.log" 2>&1 &&
	ok "promtool check config" || { cat "$work/check_config.log"; fail "promtool check config prometheus.yml"; }

# ---- The database, its monitor role and its jobs ----------------------------

psql -X -q -v ON_ERROR_STOP=1 -d postgres \
	-c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "DROP ROLE IF EXISTS $role" \
	-c "CREATE DATABASE $db" -c "CREATE ROLE $role LOGIN" || exit 1
psql_su -c "CREATE EXTENSION pqrun" -c "SELECT pqrun.grant_monitor('$role')" >/dev/null || exit 1
version=$(psql_su -Atc "SELECT extversion FROM pg_extension WHERE extname = 'pqrun'")
echo "pqrun $version in $db"
[ "$(psql_su -Atc "SELECT string_to_array('$version', '.')::int[] >= '{0,21,0}'")" = t ] ||
	{ echo "pqrun $version is installed; this suite needs 0.21.0 or later"; exit 77; }

# mon_backlog: 3 READY jobs due an hour ago that nobody picks up;
# mon_paused: 2 READY, paused; mon_later: 1 READY job due tomorrow;
# mon_fail: 1 FAILED, 1 DONE, under a concurrency and a rate limit;
# mon_orphan: a job whose session ends later.
psql_su >/dev/null <<'EOF' || exit 1
SELECT pqrun.enqueue('email', queue => 'mon_backlog', run_after => now() - interval '1 hour') FROM generate_series(1, 3);
SELECT pqrun.enqueue('report', queue => 'mon_paused') FROM generate_series(1, 2);
SELECT pqrun.pause_queue('mon_paused');
SELECT pqrun.enqueue('later', queue => 'mon_later', run_after => now() + interval '1 day');
SELECT pqrun.enqueue('charge', queue => 'mon_fail') FROM generate_series(1, 2);
SELECT pqrun.set_concurrency_limit('mon_fail', 4);
SELECT pqrun.set_rate_limit('mon_fail', 5, 10);
SELECT pqrun.enqueue('cleanup', queue => 'mon_orphan');
EOF
psql_su >/dev/null <<'EOF' || exit 1
SELECT pqrun.mark_error(id, 'card declined', terminal => true) FROM pqrun.pickup('w1', queues => '{mon_fail}');
SELECT pqrun.mark_done(id) FROM pqrun.pickup('w1', queues => '{mon_fail}');
EOF

# ---- pqrun.metrics() passes promtool check metrics --------------------------

psql -X -At -d "$db" -U "$role" -c 'SELECT pqrun.metrics()' >"$work/metrics.txt" || exit 1
if promtool check metrics <"$work/metrics.txt" >"$work/check_metrics.log" 2>&1 && [ ! -s "$work/check_metrics.log" ]; then
	ok "promtool check metrics: no finding"
else
	cat "$work/check_metrics.log"
	fail "promtool check metrics on SELECT pqrun.metrics()"
fi

# Label escaping: a queue name with a tab, a quote and a backslash. The text
# format escapes only \\, \" and \n in a label value; JSON's other escapes
# (\t, \u0001...) make strict parsers (promtool, client libraries) refuse
# the whole text and Prometheus's scraper keep a backslash and a "t".
psql_su -c "SELECT pqrun.enqueue('odd', queue => E'mon_odd\t\"q\\\\')" >/dev/null || exit 1
psql -X -At -d "$db" -U "$role" -c 'SELECT pqrun.metrics()' >"$work/metrics_odd.txt" || exit 1
if promtool check metrics <"$work/metrics_odd.txt" >"$work/check_metrics_odd.log" 2>&1; then
	ok "promtool check metrics: a queue name with a tab, a quote and a backslash"
else
	cat "$work/check_metrics_odd.log"
	fail "promtool check metrics: metrics() escapes the label value E'mon_odd\\t\"q\\\\' as JSON, not as the text format"
fi
# metrics() reports the unfinished jobs as the maintenance worker last
# counted them (pqrun.queue_overview): counted now, after the last change,
# as the worker would within pqrun.count_interval. The jobs hold still until
# the orphan's session ends below; a count of the worker's meanwhile counts
# the same.
psql_su -c "SELECT pqrun._count_live_jobs()" >/dev/null || exit 1

# ---- Exporter, stand-in dashboard, Prometheus -------------------------------

urlq() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
dsn="postgres:///$db?host=$(urlq "$PGHOST")\&port=$PGPORT\&user=$role\&sslmode=disable\&application_name=prometheus-sql-exporter"
sed -e "s|^\(      - \)'postgres://.*'\$|\1'$dsn'|" -e 's/^    interval: 15s$/    interval: 1s/' \
	"$mon/sql_exporter/pqrun.yml" >"$work/exporter.yml"
[ "$(grep -c -e "postgres:///$db?" -e '^    interval: 1s$' "$work/exporter.yml")" = 2 ] ||
	{ fail "the exporter configuration's connection or interval line was not found"; exit 1; }
LOGLEVEL=warn prometheus-sql-exporter -config.file "$work/exporter.yml" \
	-web.listen-address 127.0.0.1:$exporter_port >"$work/exporter.log" 2>&1 &
pids+=($!)

# The stand-in for the dashboard's /metrics: pqrun.metrics() as it is.
cat >"$work/standin.py" <<'EOF'
import http.server, os, subprocess, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        out = subprocess.run(["psql", "-X", "-At", "-d", os.environ["DB"], "-U", os.environ["ROLE"],
                              "-c", "SELECT pqrun.metrics()"], capture_output=True)
        self.send_response(200 if out.returncode == 0 else 500)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.end_headers()
        self.wfile.write(out.stdout if out.returncode == 0 else out.stderr)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
EOF
DB=$db ROLE=$role python3 "$work/standin.py" $standin_port >"$work/standin.log" 2>&1 &
pids+=($!)

# alerts.yml with `for:` 1 s and the oldest-READY threshold 1 s.
sed -E -e 's/^( +for: )[0-9]+[smh]$/\11s/' \
	-e 's/pqrun_oldest_ready_age_seconds > 600$/pqrun_oldest_ready_age_seconds > 1/' \
	"$mon/prometheus/alerts.yml" >"$work/alerts.yml"
[ "$(grep -c -E '^ +for: ' "$mon/prometheus/alerts.yml")" = "$(grep -c -E '^ +for: 1s$' "$work/alerts.yml")" ] &&
	grep -q 'pqrun_oldest_ready_age_seconds > 1$' "$work/alerts.yml" ||
	{ fail "the shortened copy of alerts.yml lost an edit"; exit 1; }
sed -e 's/^\(  [a-z_]*_interval: \)15s$/\11s/' -e "s|^  - alerts.yml\$|  - $work/alerts.yml|" \
	-e "s|'localhost:9237'|'127.0.0.1:$exporter_port'|" -e "s|'localhost:5480'|'127.0.0.1:$standin_port'|" \
	"$mon/prometheus/prometheus.yml" >"$work/prometheus.yml"
[ "$(grep -c -e '_interval: 1s$' -e "$work/alerts.yml" -e "127.0.0.1:5454[13]" "$work/prometheus.yml")" = 5 ] ||
	{ fail "the example prometheus.yml lost an edit"; exit 1; }
promtool check config "$work/prometheus.yml" >"$work/check_config_e2e.log" 2>&1 ||
	{ cat "$work/check_config_e2e.log"; fail "promtool check config of the test's prometheus.yml"; exit 1; }
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus-data" \
	--web.listen-address=127.0.0.1:$prom_port --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)

# ---- Checks through Prometheus's HTTP API ----------------------------------

cat >"$work/check.py" <<'EOF'
import json, os, re, subprocess, sys, time, urllib.parse, urllib.request

PROM = "http://127.0.0.1:%s" % os.environ["PROM_PORT"]
DB, WORK = os.environ["DB"], os.environ["WORK"]
JOBS = ("pqrun-dashboard", "pqrun-sql-exporter")
SCRAPE_LABELS = {"job", "instance", "database", "host"}
# The metrics 0.20.0 adds to pqrun.metrics().
NEW_020 = {"pqrun_enqueued_last_5min", "pqrun_picked_last_5min", "pqrun_errors_last_5min",
           "pqrun_rescued_total", "pqrun_shared_memory_entries", "pqrun_shared_memory_capacity"}
failures = 0

def fail(msg):
    global failures
    failures += 1
    print("FAIL: " + msg)

def ok(msg):
    print("ok: " + msg)

def api(path, **params):
    url = PROM + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)

def query(expr):
    d = api("/api/v1/query", query=expr)
    if d.get("status") != "success":
        raise RuntimeError("%s: %s" % (expr, d))
    return [(s["metric"], float(s["value"][1])) for s in d["data"]["result"]]

def by_job(expr):
    """{job: {labels without the scrape's: value}}"""
    out = {j: {} for j in JOBS}
    for m, v in query(expr):
        if m.get("job") in out:
            key = tuple(sorted((k, x) for k, x in m.items() if k not in SCRAPE_LABELS))
            out[m["job"]][key] = v
    return out

def until(what, seconds, fn):
    """Retry fn (None when satisfied, else what is still wrong) for up to `seconds`."""
    deadline = time.time() + seconds
    while True:
        try:
            wrong = fn()
        except (OSError, RuntimeError) as e:
            wrong = str(e)
        if not wrong:
            ok(what)
            return True
        if time.time() > deadline:
            fail("%s: %s" % (what, wrong))
            return False
        time.sleep(0.5)

def sql(q):
    return subprocess.run(["psql", "-X", "-At", "-F", "\t", "-d", DB, "-c", q],
                          check=True, capture_output=True, text=True).stdout.splitlines()

# Prometheus has scraped both jobs (and the exporter has run its query).
if not until("Prometheus scraped the sql-exporter and the stand-in dashboard", 60,
             lambda: None if all(by_job('pqrun_jobs{queue="mon_backlog",status="READY"}').values())
             else "no pqrun_jobs from " + ", ".join(j for j, s in by_job('pqrun_jobs{queue="mon_backlog"}').items() if not s)):
    for f in ("exporter.log", "prometheus.log", "standin.log"):
        print("--- " + f)
        print(open(os.path.join(WORK, f)).read()[-3000:])
    sys.exit(1)

# The same series through both, and the same values where they hold still.
MOVING = {"pqrun_oldest_ready_age_seconds", "pqrun_horizon_xact_age", "pqrun_dead_tuples",
          "pqrun_rate_tokens", "pqrun_key_rate_tokens", "pqrun_shared_memory_entries", "pqrun_rescued_total",
          "pqrun_live_counts_age_seconds"}
def same_series():
    s = by_job('{__name__=~"pqrun_.+",queue!~"mon_odd.*"}')
    a, b = s["pqrun-dashboard"], s["pqrun-sql-exporter"]
    if a.keys() != b.keys():
        return "only from the dashboard: %s; only from the exporter: %s" % (
            sorted(a.keys() - b.keys())[:5], sorted(b.keys() - a.keys())[:5])
    diff = [k for k in a if dict(k)["__name__"] not in MOVING and a[k] != b[k]]
    return "values differ: %s" % [(k, a[k], b[k]) for k in diff[:5]] if diff else None
until("the same series and values through the sql-exporter as through /metrics", 15, same_series)
# Label escaping (see above): the queue name with a tab as it is, through both.
odd = by_job('pqrun_jobs{queue=~"mon_odd.*",status="READY"}')
want = (("__name__", "pqrun_jobs"), ("job_type", "odd"), ("queue", 'mon_odd\t"q\\'), ("status", "READY"))
wrong = {j: list(s) for j, s in odd.items() if list(s) != [want] or s[want] != 1}
fail("label escaping: the queue name with a tab should read %r through both jobs, got %s" % (want[2], wrong)) \
    if wrong else ok("label escaping: a queue name with a tab, a quote and a backslash through both jobs")

# The exporter's own labels are gone, its database label is there.
extra = [m for m, _ in query('{__name__=~"pqrun_.+",job="pqrun-sql-exporter"}')
         if set(m) & {"metric", "col", "driver", "user", "sql_job"} or m.get("database") != DB]
if extra:
    fail("exporter labels left on pqrun series, or no database label: %s" % extra[:3])
else:
    ok("sql-exporter series carry database=%s and none of the exporter's other labels" % DB)

# Values against the database.
counts = {(q, t, s): float(n) for q, t, s, n in
          (l.split("\t") for l in sql("SELECT queue, job_type, status, count(*) FROM pqrun.jobs"
                                      " WHERE queue LIKE 'mon\\_%' AND strpos(queue, E'\\t') = 0 GROUP BY 1, 2, 3"))}
oldest = float(sql("SELECT extract(epoch FROM now() - min(run_after)) FROM pqrun.jobs"
                   " WHERE queue = 'mon_backlog' AND status = 'READY'")[0])

def expect(expr, want, tolerance=0.0):
    got = by_job(expr)
    for job in JOBS:
        vals = list(got[job].values())
        if len(vals) != 1 or abs(vals[0] - want) > tolerance:
            fail("%s from %s: %s, want %s" % (expr, job, vals, want))
            return
    ok("%s = %s" % (expr, want))

for (q, t, s), n in sorted(counts.items()):
    expect('pqrun_jobs{queue="%s",job_type="%s",status="%s"}' % (q, t, s), n)
expect('pqrun_jobs{queue="mon_backlog",status="RUNNING"}', 0)
expect('pqrun_queue_paused{queue="mon_paused"}', 1)
expect('pqrun_queue_paused{queue="mon_fail"}', 0)
# As of the count: up to pqrun.count_interval (10 s) and a scrape behind.
expect('pqrun_oldest_ready_age_seconds{queue="mon_backlog"}', oldest, tolerance=20)
expect('pqrun_oldest_ready_age_seconds{queue="mon_later"}', 0)
expect('pqrun_done_last_5min{queue="mon_fail",job_type="charge"}', 1)
expect('pqrun_concurrency_limit{queue="mon_fail"}', 4)
expect('pqrun_rate_limit{queue="mon_fail"}', 5)
for table in ("job_live", "job_done"):
    expect('count(pqrun_dead_tuples{table="%s"}) by (job)' % table, 1)
expect('count(pqrun_horizon_xact_age) by (job)', 1)
# The counts' age: taken by the setup's count or the worker's since (every 10 s).
expect('count(pqrun_live_counts_age_seconds < 60) by (job)', 1)

types = set(re.findall(r"^# TYPE (\S+) ", open(os.path.join(WORK, "metrics.txt")).read(), re.M))
missing = NEW_020 - types
if missing:
    fail("metrics() has no # TYPE for %s" % sorted(missing))
else:
    ok("metrics() has all of %s" % sorted(NEW_020))
for name in NEW_020:
    kind = "counter" if name.endswith("_total") else "gauge"
    if not re.search(r"^# TYPE %s %s$" % (name, kind), open(os.path.join(WORK, "metrics.txt")).read(), re.M):
        fail("%s is not typed %s" % (name, kind))
expect('pqrun_enqueued_last_5min{queue="mon_backlog",job_type="email"}', 3)
expect('pqrun_picked_last_5min{queue="mon_backlog",job_type="email"}', 0)
expect('pqrun_picked_last_5min{queue="mon_fail",job_type="charge"}', 2)
expect('pqrun_errors_last_5min{queue="mon_fail",job_type="charge"}', 1)
expect('count(pqrun_rescued_total{reason=~"stale|orphaned"}) by (job)', 2)
expect('count(pqrun_shared_memory_capacity{table="queue_counters"} > 0) by (job)', 1)
used = query('pqrun_shared_memory_entries / pqrun_shared_memory_capacity')
if not used or any(not 0 <= v <= 1 for _, v in used):
    fail("shared memory entries / capacity: %s" % used)
else:
    ok("shared memory entries / capacity within [0, 1] for %d tables" % len(used))
# A job whose session ends while RUNNING: maintenance rescues it (orphaned).
subprocess.run(["psql", "-X", "-q", "-d", DB, "-c", "SET pqrun.claim_hold = session",
                "-c", "SELECT id FROM pqrun.pickup('w2', queues => '{mon_orphan}')"], check=True,
               capture_output=True)

# Alerts for real.
def alerts():
    return [a for a in api("/api/v1/alerts")["data"]["alerts"]]

def firing(name, want, unwanted=()):
    def check():
        got = [a["labels"] for a in alerts() if a["labels"]["alertname"] == name and a["state"] == "firing"]
        bad = [l for l in got if any(all(l.get(k) == v for k, v in u.items()) for u in unwanted)]
        if bad:
            return "fires for %s" % bad
        for job in JOBS if want.get("job") is None else (want["job"],):
            if not any(l.get("job") == job and all(l.get(k) == v for k, v in want.items()) for l in got):
                return "not firing for %s from %s (firing: %s)" % (want, job, got)
        return None
    until("%s fires for %s and not for %s" % (name, want, list(unwanted)), 30, check)

firing("PqrunOldestReadyTooOld", {"queue": "mon_backlog", "job_type": "email"},
       unwanted=[{"queue": "mon_paused"}, {"queue": "mon_later"}])
firing("PqrunQueueNotPickedUp", {"queue": "mon_backlog", "job_type": "email"},
       unwanted=[{"queue": "mon_paused"}, {"queue": "mon_later"}, {"queue": "mon_fail"}])
firing("PqrunOrphanedJobsRescued", {"reason": "orphaned"})

# Metric names in the rules Prometheus loaded and in the dashboard.
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
            "bool", "offset", "inf", "nan"}
def names(expr):
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)            # strings
    e = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", e)              # matchers, ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\$\{?\w+\}?", " ", e)                      # dashboard variables
    return {m.group(1) for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)\b(?!\s*\()", e)
            if m.group(1).lower() not in KEYWORDS}

known = set(types)
rules = [r for g in api("/api/v1/rules")["data"]["groups"] for r in g["rules"]]
known |= {r["name"] for r in rules if r["type"] == "recording"}
bad = {(r["name"], n) for r in rules for n in names(r["query"])
       if n not in known and n != "sql_exporter_last_scrape_failed"}
fail("rules name metrics pqrun does not expose: %s" % sorted(bad)) if bad else \
    ok("the %d rules name only pqrun's metrics" % len(rules))

dash = json.load(open(os.environ["DASHBOARD"]))
inputs = [i for i in dash.get("__inputs", []) if i.get("type") == "datasource" and i.get("pluginId") == "prometheus"]
if not inputs:
    fail("the dashboard has no __inputs entry of a prometheus data source")
ds = "${%s}" % inputs[0]["name"] if inputs else None
targets = [(p["title"], t) for p in dash["panels"] for t in p.get("targets", [])]
variables = dash.get("templating", {}).get("list", [])
exprs = [(t, x["expr"]) for t, x in targets]
exprs += [(v["name"], m.group(1) + (m.group(2) or ""))
          for v in variables for m in [re.match(r"label_values\((\w+)(\{.*\})?,", v["definition"])] if m]
if not targets or any(x.get("datasource", {}).get("uid") != ds for _, x in targets) \
        or any(p.get("datasource", {}).get("uid") != ds for p in dash["panels"] if p["type"] != "row") \
        or any(v.get("datasource", {}).get("uid") != ds for v in variables):
    fail("a panel, target or variable of the dashboard does not use the data source %s" % ds)
bad = {(t, n) for t, e in exprs for n in names(e) if n not in known}
fail("dashboard expressions name metrics pqrun does not expose: %s" % sorted(bad)) if bad else \
    ok("the dashboard's %d expressions name only pqrun's metrics" % len(exprs))
for title, e in exprs:
    concrete = re.sub(r"\$\{?(queue|instance|database)\}?", ".*", e)
    try:
        query(concrete)
    except (OSError, RuntimeError) as err:
        fail("dashboard expression of %r does not evaluate: %s" % (title, err))
ok("every dashboard expression evaluates")

sys.exit(1 if failures else 0)
EOF
PROM_PORT=$prom_port DB=$db WORK=$work DASHBOARD=$mon/grafana/pqrun.json \
	python3 "$work/check.py" || failures=$((failures + 1))

if [ "$failures" != 0 ]; then
	echo "monitoring: $failures check(s) failed (logs in $work)"
	exit 1
fi
echo "monitoring: all checks passed"
