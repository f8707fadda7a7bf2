# standin — top-level build. `make` builds build/standin and the shims;
# `make check` installs missing packages, builds and runs every test.
PREFIX ?= /usr/local
CC ?= gcc
VERSION := 0.1.0
B := build

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=gnu11 $(WARN) -fPIC -fvisibility=hidden -pthread \
	-D_GNU_SOURCE -DSTANDIN_VERSION=\"$(VERSION)\" -I. -Itraces -Iinterpose -Iinterfaces -Ireplay \
	-I$(B)/gen $(CFLAGS)
LDLIBS_BASE := -ldeflate -lz -ldl -pthread -lm
# standin's own code (not the programs it measures): block copies and
# clears of variable or mid size go to glibc's memcpy/memset, not inline
# `rep movs`/`rep stos`, whose start-up costs ~30 TSC ticks on this AMD
# EPYC for a 152-byte clear against ~9 for glibc's (the per-call structs
# of record and the trace writer). x86 gcc only; probed, so other
# compilers and machines build as before.
STRINGOP := $(shell $(CC) -mstringop-strategy=libcall -x c -c -o /dev/null /dev/null \
	2>/dev/null && echo -mstringop-strategy=libcall)
# Loop heads on 32-byte boundaries (the front end fetches and caches
# decoded code in 32-byte windows): a repeated 1 KB unpack's harness, which
# loops over the tree's pieces, took 105.6 ns against 111.4 (10 alternating
# rounds on the Intel test VM; -6.3 and -5.9 ns in two more series, with
# -falign-functions=64 too, which alone gave -2); pack, size, the tree as
# one block and software replay of pbtest moved within their noise (+0.4,
# +1.1, +1.6 ns; 1.0369 both), for 1.3% more code. Probed, as above.
LOOPALIGN := $(shell $(CC) -falign-loops=32 -x c -c -o /dev/null /dev/null \
	2>/dev/null && echo -falign-loops=32)

# ---- libraries (plain, no preload knowledge) -----------------------------
TRACE_SRC := $(wildcard traces/*.c)
# procwrap.c defines exec*/_exit hooks and deepbind.c dlopen: linked into
# the shims only (as objects: --exclude-libs would hide them from an
# archive), never into a library the CLI or the tests could pull it from.
PROCWRAP := $(B)/obj/interpose/procwrap.o $(B)/obj/interpose/deepbind.o $(B)/obj/interpose/handles.o
INTERPOSE_SRC := $(filter-out interpose/procwrap.c interpose/deepbind.c interpose/handles.c,$(wildcard interpose/*.c))
IFACE_SRC := $(wildcard interfaces/*.c)
RECORD_SRC := $(wildcard record/*.c)
REPLAY_SRC := $(wildcard replay/*.c)
CLI_SRC := $(wildcard cli/*.c)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

TRACE_LIB := $(B)/libsttrace.a
INTERPOSE_LIB := $(B)/libstinterpose.a
IFACE_LIB := $(B)/libstiface.a
RECORD_SO := $(B)/lib/standin/libstandin-record.so
REPLAY_SO := $(B)/lib/standin/libstandin-replay.so
STANDIN := $(B)/standin

.PHONY: all deps check unit e2e demo bench corpus install clean format
all: $(STANDIN) $(RECORD_SO) $(if $(REPLAY_SRC),$(REPLAY_SO))

deps:
	@./scripts/deps.sh

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(STRINGOP) $(LOOPALIGN) -MMD -MP -c $< -o $@

$(TRACE_LIB): $(call obj,$(TRACE_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(INTERPOSE_LIB): $(call obj,$(INTERPOSE_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^
$(IFACE_LIB): $(call obj,$(IFACE_SRC))
	@mkdir -p $(dir $@); rm -f $@; ar rcs $@ $^

# Preload shims: export only the hooks, resolve everything at link time.
# The record shim loads libunwind and libdeflate itself, when a process
# first needs them (record/lazylibs.c): not linked. The replay shim needs
# neither (nor zlib): every process of a replayed run maps one library less.
SHIM_LDFLAGS := -shared -Wl,--no-undefined -Wl,-z,now -Wl,--exclude-libs,ALL
$(RECORD_SO): $(call obj,$(RECORD_SRC)) $(PROCWRAP) $(INTERPOSE_LIB) $(TRACE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SHIM_LDFLAGS) -o $@ $^ -ldl -pthread -lm
$(REPLAY_SO): $(call obj,$(REPLAY_SRC)) $(PROCWRAP) $(INTERPOSE_LIB) $(IFACE_LIB) $(TRACE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SHIM_LDFLAGS) -o $@ $^ -ldl -pthread -lm

# The CLI links libprotobuf-c, libjpeg and TurboJPEG: it parses recorded bytes
# and decodes recorded images again offline (replay DB).
# The CLI finds its own libraries where it was linked against them, before
# LD_LIBRARY_PATH (DT_RPATH, unlike RUNPATH, comes first): that variable is
# the program's, and a program shipped with its own libprotobuf-c (an older
# one, without the symbols standin links) made `standin replay` die in the
# loader before it could start the program.
CLI_LIBDIRS := $(patsubst %/,%,$(sort $(dir $(realpath $(foreach l,protobuf-c jpeg turbojpeg deflate z,\
	$(shell $(CC) -print-file-name=lib$(l).so 2>/dev/null))))))
CLI_SPACE := $(subst ,, )
CLI_COMMA := ,
CLI_RPATH := $(if $(CLI_LIBDIRS),-Wl$(CLI_COMMA)--disable-new-dtags \
	-Wl$(CLI_COMMA)-rpath$(CLI_COMMA)$(subst $(CLI_SPACE),:,$(CLI_LIBDIRS)))

$(STANDIN): $(call obj,$(CLI_SRC)) $(IFACE_LIB) $(INTERPOSE_LIB) $(TRACE_LIB)
	$(CC) -o $@ $^ $(CLI_RPATH) -lprotobuf-c -ljpeg -lturbojpeg $(LDLIBS_BASE)

# ---- generated protobuf-c code for tests and workloads -------------------
PROTOS := $(wildcard tests/proto/*.proto workloads/*/*.proto)
GEN_C := $(patsubst %.proto,$(B)/gen/%.pb-c.c,$(notdir $(PROTOS)))
vpath %.proto tests/proto $(wildcard workloads/*)
$(B)/gen/%.pb-c.c $(B)/gen/%.pb-c.h: %.proto
	@mkdir -p $(B)/gen
	protoc-c --proto_path=$(dir $<) --c_out=$(B)/gen $<
$(B)/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# ---- tests ---------------------------------------------------------------
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))
GEN_OBJ := $(patsubst $(B)/gen/%.c,$(B)/obj/gen/%.o,$(GEN_C))
CHECK_LIBS = $$(pkg-config --cflags --libs check) -lprotobuf-c -ljpeg -lturbojpeg $(LDLIBS_BASE)
# The trace library is tested alone: it must not depend on anything else.
$(B)/tests/test_traces: tests/unit/test_traces.c $(TRACE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(CHECK_LIBS)
$(B)/tests/test_pb_walk: tests/unit/test_pb_walk.c $(GEN_OBJ) $(INTERPOSE_LIB) $(TRACE_LIB) | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(CHECK_LIBS)
# The offline analysis lives in the CLI: its test links the CLI's objects.
$(B)/tests/test_analysis: tests/unit/test_analysis.c $(call obj,$(filter-out cli/standin.c,$(CLI_SRC))) $(GEN_OBJ) $(IFACE_LIB) $(INTERPOSE_LIB) $(TRACE_LIB) | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(CHECK_LIBS)
# pbw_fingerprint_packed is checked on random trees of every type the build
# compiles (protogen's registry) and of the HyperProtoBench schemas (test
# data outside the repository, as for tests/e2e/workload_tests.sh): each of
# those in a shared object of its own, since their type names collide,
# loaded by the test.
HPB_DIR ?= $(or $(STANDIN_HYPERPROTOBENCH),$(CURDIR)/../shared/data/hyperprotobench)
HPB_SO := $(patsubst $(HPB_DIR)/%.proto,$(B)/hpb/%.so,$(wildcard $(HPB_DIR)/bench*.proto))
$(B)/hpb/%.so: $(HPB_DIR)/%.proto workloads/protogen/registry.sh
	@rm -rf $(B)/hpb/$* && mkdir -p $(B)/hpb/$*
	protoc-c --proto_path=$(HPB_DIR) --c_out=$(B)/hpb/$* $<
	(cd $(B)/hpb/$* && $(CURDIR)/workloads/protogen/registry.sh $*.pb-c.h) >$(B)/hpb/$*/registry.c
	$(CC) $(ALL_CFLAGS) -O1 -c -o $(B)/hpb/$*/types.o $(B)/hpb/$*/$*.pb-c.c
	$(CC) $(ALL_CFLAGS) -O1 -fvisibility=default -I$(B)/hpb/$* -c -o $(B)/hpb/$*/registry.o \
		$(B)/hpb/$*/registry.c
	$(CC) -shared -o $@ $(B)/hpb/$*/types.o $(B)/hpb/$*/registry.o -lprotobuf-c
$(B)/tests/test_pb_fpbytes: tests/unit/test_pb_fpbytes.c workloads/protogen/filler.h $(B)/gen/protogen_registry.c $(GEN_OBJ) $(INTERPOSE_LIB) $(TRACE_LIB) $(HPB_SO) | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DHPB_SOS='"$(HPB_SO)"' -o $@ $(filter %.c %.o %.a,$^) $(CHECK_LIBS)
# The replay shim's engine choice is a pure function of its timeline.
$(B)/tests/test_rp_engines: tests/unit/test_rp_engines.c $(call obj,replay/rp_engines.c)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(CHECK_LIBS)
OTHER_UNIT := $(filter-out $(B)/tests/test_traces $(B)/tests/test_pb_walk $(B)/tests/test_analysis $(B)/tests/test_pb_fpbytes $(B)/tests/test_rp_engines,$(UNIT_BIN))
$(OTHER_UNIT): $(B)/tests/%: tests/unit/%.c $(GEN_OBJ) $(IFACE_LIB) $(INTERPOSE_LIB) $(TRACE_LIB) | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(CHECK_LIBS)

# End-to-end programs: tests/e2e/progs/NAME.c, linked with generated code.
PROG_SRC := $(wildcard tests/e2e/progs/*.c) $(wildcard workloads/*/*.c) $(wildcard bench/*.c)
PROG_BIN := $(patsubst %.c,$(B)/progs/%,$(notdir $(PROG_SRC)))
vpath %.c tests/e2e/progs bench $(wildcard workloads/*)
$(PROG_BIN): $(B)/progs/%: %.c $(GEN_OBJ) | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lprotobuf-c -ljpeg -lturbojpeg $(LDLIBS_BASE)
# pbtest with libprotobuf-c linked in from its static archive: calls that no
# shim can reach, which record must say (t017).
PROG_BIN += $(B)/progs/pbtest-builtin
$(B)/progs/pbtest-builtin: tests/e2e/progs/pbtest.c $(GEN_OBJ) | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -Wl,-Bstatic -lprotobuf-c -Wl,-Bdynamic $(LDLIBS_BASE)
# gentrace writes traces: it links the trace library too.
$(B)/progs/gentrace: $(TRACE_LIB)
# protogen needs a list of the message types it can build, which protoc-c
# does not emit: here, every schema the build compiles (build.sh does the
# same for a user's schema).
$(B)/gen/protogen_registry.c: $(GEN_C) workloads/protogen/registry.sh
	(cd $(B)/gen && $(CURDIR)/workloads/protogen/registry.sh $(notdir $(GEN_C:.c=.h))) >$@
$(B)/progs/protogen: $(B)/gen/protogen_registry.c

$(call obj,$(TRACE_SRC) $(INTERPOSE_SRC) $(IFACE_SRC) $(RECORD_SRC) $(REPLAY_SRC) $(CLI_SRC)) $(PROCWRAP): | $(GEN_C)

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; CK_FORK=yes $$t; done

e2e: all $(PROG_BIN)
	@B=$(B) tests/e2e/run.sh

# Builds use every CPU; tests run one make target at a time (run.sh runs
# E2E_JOBS tests side by side itself).
NPROC := $(shell nproc 2>/dev/null || echo 1)

check: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all $(UNIT_BIN) $(PROG_BIN)
	@$(MAKE) --no-print-directory -j1 unit e2e
	@$(MAKE) --no-print-directory fuzz-check
	@$(MAKE) --no-print-directory check-sanitize

demo: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all $(PROG_BIN)
	@B=$(B) ./scripts/demo.sh

bench: deps
	@$(MAKE) --no-print-directory all $(PROG_BIN) $(FASTPB)
	@B=$(B) ./bench/run.sh

# The bundled workloads' JPEG corpus, thumbnails to 12 megapixels; files
# that exist are kept.
corpus: deps
	@$(MAKE) --no-print-directory $(B)/progs/imagegen
	@IMAGEGEN=$(B)/progs/imagegen workloads/corpus/make_corpus.sh $(B)/corpus-full

# Ground truth: a faster implementation of the rpc workload's protobuf calls,
# preloaded beneath the recorder (validate/run.sh).
FASTPB := $(B)/validate/libfastpb.so
$(FASTPB): validate/fastpb.c | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -fPIC -shared -fvisibility=hidden -I$(B)/gen -o $@ $< -ldl

validate: deps
	@$(MAKE) --no-print-directory all $(PROG_BIN) $(FASTPB)
	@B=$(B) validate/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/standin \
		$(DESTDIR)$(PREFIX)/include/standin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(STANDIN) $(DESTDIR)$(PREFIX)/bin/standin
	install -m 644 $(B)/lib/standin/*.so $(DESTDIR)$(PREFIX)/lib/standin/
	install -m 644 record/valgrind.supp $(DESTDIR)$(PREFIX)/lib/standin/
	install -m 644 interfaces/standin_iface.h $(DESTDIR)$(PREFIX)/include/standin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' interfaces/standin.pc.in \
		>$(DESTDIR)$(PREFIX)/lib/pkgconfig/standin.pc

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(B)

include fuzz/fuzz.mk
include tests/sanitize.mk

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
