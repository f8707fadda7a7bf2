# tests/sanitize.mk — the tests again under the sanitizers (included by the
# top-level Makefile; the last step of make check, which .ci/run runs).
#
#   make check-sanitize   unit and end-to-end tests with everything (the
#                         command, both shims, the test programs) built with
#                         AddressSanitizer + UndefinedBehaviorSanitizer in
#                         build-asan/, then the multi-threaded and forking
#                         record and replay tests with ThreadSanitizer in
#                         build-tsan/
#
# The test programs are built with the sanitizer too, so the shims find its
# runtime already loaded. Programs the tests run that are not ours (sh,
# prlimit, python) load it through the preloaded shim, hence
# verify_asan_link_order=0. Tests that cannot run under a sanitizer
# (valgrind) skip themselves when STANDIN_SANITIZER is set.

# The sanitizer goes into CC: the link lines use CC but not CFLAGS.
SAN_ASAN_MAKE := B=build-asan CFLAGS="-O1 -g -fno-omit-frame-pointer" \
	CC="gcc -fsanitize=address,undefined -fno-sanitize-recover=undefined"
SAN_TSAN_MAKE := B=build-tsan CFLAGS="-O1 -g" CC="gcc -fsanitize=thread"
# ASan leaves fatal signals alone: the tests check that programs die of
# them exactly as they would without standin. In programs that are not
# ours, the shim brings the ASan runtime in after the program's libraries,
# which then sees the shim's globals registered twice: not an ODR bug.
SAN_ASAN_ENV := STANDIN_SANITIZER=asan \
	ASAN_OPTIONS=verify_asan_link_order=0:detect_odr_violation=0:detect_leaks=0:exitcode=86:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86
# TSan slows the writer ~20x (27 us a record in t603's close): with 4 MiB
# rings, four threads' backlog took more than the 2 s a dying program waits
# for its trace in 2-7 of 60 runs; the default 1 MiB keeps it within (0/40).
SAN_TSAN_ENV := STANDIN_SANITIZER=tsan \
	TSAN_OPTIONS=halt_on_error=1:exitcode=86:report_signal_unsafe=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0
# Threads, thread pools, a fatal signal and exit while threads call, shared
# accelerator timelines. Not forks: TSan cannot follow a process that forks
# while it has threads, and the writer thread makes every recording process
# threaded (ASan covers the fork tests). One at a time: under TSan a dying
# program's wait for its trace is near its limit already (above).
SAN_TSAN_TESTS := t002_ t021_ t022_ t102_ t103_ t125_ t304_ t603_ t606_ t607_ t632_

.PHONY: check-sanitize check-asan check-tsan
check-sanitize: deps
	@$(MAKE) --no-print-directory check-asan
	@$(MAKE) --no-print-directory check-tsan

check-asan:
	@echo "== ASan + UBSan (build-asan/)"
	@mkdir -p build-asan && $(MAKE) --no-print-directory -j$(NPROC) $(SAN_ASAN_MAKE) all sanitize-bins \
		>build-asan/build.log 2>&1 || { tail -30 build-asan/build.log; exit 1; }
	@$(SAN_ASAN_ENV) $(MAKE) --no-print-directory -j1 $(SAN_ASAN_MAKE) unit e2e

check-tsan:
	@echo "== TSan: threaded record and replay tests (build-tsan/)"
	@mkdir -p build-tsan && $(MAKE) --no-print-directory -j$(NPROC) $(SAN_TSAN_MAKE) all sanitize-bins \
		>build-tsan/build.log 2>&1 || { tail -30 build-tsan/build.log; exit 1; }
	@$(SAN_TSAN_ENV) B=build-tsan E2E_JOBS=1 tests/e2e/run.sh $(SAN_TSAN_TESTS)

sanitize-bins: $(UNIT_BIN) $(PROG_BIN)
