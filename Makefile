# Makefile — builds the pqrun extension with PGXS (C++17) and wires its tests.
#
# `make && make install` builds and installs; `make test` runs every suite
# against a throwaway cluster (see test/run.sh, which is what the README and CI
# call). `make installcheck` runs the pg_regress and isolation suites against
# an already running server that preloads pqrun.

EXTENSION  = pqrun
EXTVERSION = $(shell sed -n "s/^default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" pqrun.control)

MODULE_big = pqrun
OBJS = $(patsubst %.cpp,%.o,$(wildcard src/*.cpp src/*/*.cpp))

DATA       = $(filter-out sql/pqrun--$(EXTVERSION).sql,$(wildcard sql/pqrun--*.sql))
DATA_built = sql/pqrun--$(EXTVERSION).sql

REGRESS      = setup enqueue enqueue_same_row pickup pickup_same_jobs claim_visibility finish lifecycle finish_and_claim dependencies fifo operate schedule validation controls flow_control keys key_rates bulk metrics drop
REGRESS_OPTS = --inputdir=.
ISOLATION      = pickup_race claim_vs_readers dedupe_race pickup_vs_reap done_vs_cancel done_vs_writers error_vs_dependents schedule_race notify alter_vs_kept_checks fifo_lock_order give_back_race limit_race pause_rate_race key_limit_race key_rate_race controls_changes
ISOLATION_OPTS = --inputdir=test/isolation

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
includedir_server := $(shell $(PG_CONFIG) --includedir-server)

PG_CPPFLAGS = -Isrc -isystem $(includedir_server)
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-register -Wno-unused-parameter -Wno-missing-field-initializers
ifeq ($(ERROR_ON_WARNING),1)
PG_CXXFLAGS += -Werror
endif
SHLIB_LINK += -lstdc++

EXTRA_CLEAN = sql/pqrun--$(EXTVERSION).sql results regression.diffs regression.out output_iso tmp_check tmp_check_iso

# No LLVM bitcode for JIT inlining: it would need clang on every build
# machine and buys nothing for code that runs SPI.
override with_llvm = no

include $(PGXS)

# PGXS tracks no header dependencies: rebuild everything when a header
# changes, so no object is ever compiled against an older struct layout.
$(OBJS): $(wildcard src/*.hpp src/*/*.hpp)

# The version goes only into pqrun.o and installed.o so other objects do not
# rebuild on a bump. The library serves its version's SQL and the one before:
# the version the update script to it starts from.
PREVIOUS_VERSION = $(patsubst sql/pqrun--%--$(EXTVERSION).sql,%,$(wildcard sql/pqrun--*--$(EXTVERSION).sql))
src/pqrun.o: override CPPFLAGS += -DPQRUN_VERSION=\"$(EXTVERSION)\"
src/pqrun.o: pqrun.control
src/pg/installed.o: override CPPFLAGS += -DPQRUN_VERSION=\"$(EXTVERSION)\" -DPQRUN_PREVIOUS_VERSION=\"$(PREVIOUS_VERSION)\"
src/pg/installed.o: pqrun.control

# Unlink the installed module first: overwriting it in place would change the
# code under every running server that has it loaded.
install-lib-shared: unlink-installed-module
.PHONY: unlink-installed-module
unlink-installed-module:
	rm -f '$(DESTDIR)$(pkglibdir)/$(MODULE_big)$(DLSUFFIX)'

# The install script: sql/pqrun.sql with each `\ir` line replaced by the file
# under sql/pqrun/ it names (one per table, view and function).
sql/pqrun--$(EXTVERSION).sql: sql/pqrun.sql $(wildcard sql/pqrun/*/*.sql)
	awk '/^\\ir /{ f = "sql/" $$2; n = 0; while ((r = (getline l < f)) > 0) { print l; n++ } close(f); \
	     if (r < 0 || n == 0) { print "sql/pqrun.sql: cannot include " f > "/dev/stderr"; exit 1 } next } { print }' \
	    $< >$@.tmp && mv $@.tmp $@

.PHONY: test pgtap unit format lint
test:
	bash test/run.sh

pgtap:
	pg_prove --ext .sql test/pgtap/

unit:
	$(MAKE) -C test/unit

format:
	clang-format -i src/*.cpp src/*.hpp src/*/*.cpp src/*/*.hpp

lint:
	clang-tidy src/*.cpp src/*/*.cpp -- -std=c++17 -Isrc -isystem $(includedir_server)

# `make dist`: the PGXN release, pqrun-X.Y.Z.zip, from `git archive` of HEAD
# (committed files only, less those .gitattributes marks export-ignore), the
# version read from HEAD's pqrun.control so that name and contents agree.
DIST_VERSION = $(shell git show HEAD:pqrun.control 2>/dev/null | sed -n "s/^default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p")
EXTRA_CLEAN += $(EXTENSION)-*.zip
.PHONY: dist
dist:
	@test -n "$(DIST_VERSION)" || { echo "make dist needs a git checkout with pqrun.control committed" >&2; exit 1; }
	git archive --format=zip --prefix=$(EXTENSION)-$(DIST_VERSION)/ -o $(EXTENSION)-$(DIST_VERSION).zip HEAD
