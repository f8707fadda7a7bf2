# fuzz/fuzz.mk — fuzz harnesses for everything standin reads that someone
# else may have written (included by the top-level Makefile). See
# fuzz/README.md.
#
#   make fuzz          clang + libFuzzer + ASan/UBSan: run each harness for
#                      FUZZ_SECONDS (default 60) on a copy of its corpus
#   make fuzz-check    part of make check: the saved crashing inputs and the
#                      corpus, then FUZZ_CHECK_SECONDS (default 8) of fuzzing
#                      per harness; without a working libFuzzer, the corpus
#                      and crashes run through a gcc + ASan/UBSan driver
#   make fuzz-seeds    regenerate fuzz/corpus from fresh recordings
#
# Builds go to build-fuzz/ (libFuzzer) or build-fuzz-gcc/ (driver), with
# every library compiled by the same compiler and sanitizers.

FUZZ_SECONDS ?= 60
FUZZ_CHECK_SECONDS ?= 8
FUZZ_NAMES := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# libFuzzer runs: quiet targets, bounded inputs and memory, no leak noise
# from the CLI's one-time allocations
FUZZ_RUN_FLAGS := -close_fd_mask=3 -max_len=65536 -rss_limit_mb=2048 -timeout=20
FUZZ_ASAN_OPTIONS := detect_leaks=0:allocator_may_return_null=1

.PHONY: fuzz fuzz-check fuzz-bins fuzz-seeds

# Does clang link a libFuzzer program here? (Debian: clang + libclang-rt-dev)
FUZZ_HAVE_LIBFUZZER = $(shell printf 'int LLVMFuzzerTestOneInput(const char *d, long n){return 0;}' | \
	clang -x c -fsanitize=fuzzer -o /dev/null - >/dev/null 2>&1 && echo yes)

# ---- building (runs in a sub-make with B, CC and CFLAGS set) --------------
FUZZ_CLI_OBJ = $(filter-out $(B)/obj/cli/standin.o,$(call obj,$(CLI_SRC)))
FUZZ_DEPS = $(FUZZ_CLI_OBJ) $(GEN_OBJ) $(IFACE_LIB) $(INTERPOSE_LIB) $(TRACE_LIB)
FUZZ_MAIN ?= $(B)/obj/fuzz/driver.o
FUZZ_LDFLAGS_replay_db := -Wl,--wrap=fopen

fuzz-bins: $(patsubst %,$(B)/fuzz/fuzz_%,$(FUZZ_NAMES))

$(B)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(FUZZ_DEPS) $(filter %.o,$(FUZZ_MAIN)) | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Icli -o $@ $< $(FUZZ_MAIN) $(FUZZ_DEPS) -Wl,--wrap=dlopen \
		$(FUZZ_LDFLAGS_$*) -lprotobuf-c -ljpeg -lturbojpeg $(LDLIBS_BASE)

$(B)/fuzz/seeds: fuzz/seeds.c $(INTERPOSE_LIB) $(TRACE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lprotobuf-c -ljpeg -lturbojpeg $(LDLIBS_BASE)

# ---- running --------------------------------------------------------------
FUZZ_LF_MAKE = $(MAKE) --no-print-directory -j$(NPROC) B=build-fuzz CC=clang \
	CFLAGS="-O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link" FUZZ_MAIN=-fsanitize=fuzzer fuzz-bins
FUZZ_GCC_MAKE = $(MAKE) --no-print-directory -j$(NPROC) B=build-fuzz-gcc CC=gcc \
	CFLAGS="-O1 -g $(FUZZ_SAN)" fuzz-bins

# fuzz_run NAME SECONDS: the crashes saved for NAME, then SECONDS of fuzzing
# on a scratch copy of its corpus (new finds are kept in build-fuzz/corpus)
define fuzz_run
	mkdir -p build-fuzz/corpus/$(1) build-fuzz/artifacts/$(1) && \
	cp -n fuzz/corpus/$(1)/* build-fuzz/corpus/$(1)/ 2>/dev/null; \
	if ls fuzz/crashes/$(1)/* >/dev/null 2>&1; then \
		ASAN_OPTIONS=$(FUZZ_ASAN_OPTIONS) build-fuzz/fuzz/fuzz_$(1) $(FUZZ_RUN_FLAGS) \
			fuzz/crashes/$(1)/* >build-fuzz/$(1).regress.log 2>&1 || \
			{ tail -40 build-fuzz/$(1).regress.log; exit 1; }; fi && \
	ASAN_OPTIONS=$(FUZZ_ASAN_OPTIONS) build-fuzz/fuzz/fuzz_$(1) $(FUZZ_RUN_FLAGS) \
		-max_total_time=$(2) -artifact_prefix=build-fuzz/artifacts/$(1)/ \
		-print_final_stats=1 build-fuzz/corpus/$(1) >build-fuzz/$(1).log 2>&1 || \
		{ tail -60 build-fuzz/$(1).log; echo "fuzz_$(1): FINDING, input in build-fuzz/artifacts/$(1)/"; exit 1; }; \
	echo "fuzz_$(1): $$(grep -o 'stat::number_of_executed_units: *[0-9]*' build-fuzz/$(1).log | \
		grep -o '[0-9]*$$') runs in $(2) s, no finding"
endef

fuzz: deps
	@test "$(FUZZ_HAVE_LIBFUZZER)" = yes || { echo "make fuzz needs clang with libFuzzer (scripts/deps.sh installs it)"; exit 1; }
	@mkdir -p build-fuzz && $(FUZZ_LF_MAKE) >build-fuzz/build.log 2>&1 || { tail -30 build-fuzz/build.log; exit 1; }
	@$(foreach n,$(FUZZ_NAMES),$(call fuzz_run,$(n),$(FUZZ_SECONDS)) &&) true

fuzz-check:
	@if [ "$(FUZZ_HAVE_LIBFUZZER)" = yes ]; then \
		mkdir -p build-fuzz && $(FUZZ_LF_MAKE) >build-fuzz/build.log 2>&1 || { tail -30 build-fuzz/build.log; exit 1; }; \
		$(MAKE) --no-print-directory -j$(NPROC) $(addprefix fuzz-check-run-,$(FUZZ_NAMES)); \
	else \
		echo "fuzz-check: no libFuzzer here: the corpus and saved crashes run under gcc ASan/UBSan"; \
		mkdir -p build-fuzz-gcc && $(FUZZ_GCC_MAKE) >build-fuzz-gcc/build.log 2>&1 || { tail -30 build-fuzz-gcc/build.log; exit 1; }; \
		$(foreach n,$(FUZZ_NAMES),ASAN_OPTIONS=$(FUZZ_ASAN_OPTIONS) \
			build-fuzz-gcc/fuzz/fuzz_$(n) fuzz/corpus/$(n) $(wildcard fuzz/crashes/$(n)) \
			>build-fuzz-gcc/$(n).log 2>&1 && tail -1 build-fuzz-gcc/$(n).log || \
			{ tail -40 build-fuzz-gcc/$(n).log; exit 1; } &&) true; \
	fi

# one harness's share of fuzz-check, run side by side with the others
fuzz-check-run-%:
	@$(call fuzz_run,$*,$(FUZZ_CHECK_SECONDS))

fuzz-seeds: all $(PROG_BIN) $(B)/fuzz/seeds
	@B=$(B) fuzz/make_corpus.sh
