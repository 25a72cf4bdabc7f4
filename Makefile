# tracekit: the development build (GNU make).
#
#   make            the NIFs and tracekit-cat into priv/, the beams (rebar3)
#   make test       C core tests, the same under ASan+UBSan and TSan, EUnit, CT,
#                   the Elixir tests (ExUnit, iex)
#   make test-all   `make test` on OTP 27, then on OTP 29 (the C core tests,
#                   which need no OTP, in the first only)
#   make test-package  tracekit as a dependency: a rebar3 project, its
#                   release, the Hex-style tarball, a mix project
#   make check      dialyzer and xref
#   make bench      benchmarks (not part of the tests)
#   make demo       the demonstration run of README.md
#   make test-viewers  exports and the HTML report checked in headless Chromium
#   make clean, make distclean
#
# OTP=27|29 selects the release (see scripts/otp); without it, the PATH's
# erl is used when it is release 27 or newer, else OTP 29 is provisioned.
# What the package ships (priv/*.so, priv/bin/tracekit-cat) is built by
# c_src/build.sh, which is also what rebar3's pre-compile hook runs in a
# project that depends on tracekit.

SHELL := /bin/sh
.SUFFIXES:
.DELETE_ON_ERROR:
.DEFAULT_GOAL := all

BUILD := sh c_src/build.sh
# Warnings are errors here (c_src/build.sh leaves them warnings for the
# compilers of projects that depend on tracekit).
export TK_WERROR := 1
# The language and warning flags of every C file. ($(shell) sees the
# environment make was started with, not the variables it exports.)
C_BASE := $(shell TK_WERROR=1 $(BUILD) cflags)

# ---- OTP selection (once per make invocation) --------------------------------
# Only for goals that need an OTP: these do not.
NO_OTP_GOALS := clean distclean test-all
ifneq ($(filter-out $(NO_OTP_GOALS),$(or $(MAKECMDGOALS),$(.DEFAULT_GOAL))),)
OTP_PATH := $(shell OTP='$(OTP)' scripts/otp path)
ifeq ($(strip $(OTP_PATH)),)
$(error no usable Erlang/OTP: scripts/otp failed, see the message above)
endif
export PATH := $(OTP_PATH):$(PATH)
OTP_ERL_LIBS := $(shell OTP='$(OTP)' PATH='$(OTP_PATH)':"$$PATH" scripts/otp erl-libs)
ifneq ($(strip $(OTP_ERL_LIBS)),)
export ERL_LIBS := $(OTP_ERL_LIBS)$(if $(ERL_LIBS),:$(ERL_LIBS))
endif

# "<otp release> <erts version> <root dir> <erl_interface dir>"
OTP_FACTS := $(shell PATH='$(OTP_PATH)':"$$PATH" $(BUILD) facts)
OTP_REL   := $(word 1,$(OTP_FACTS))
ERTS_VSN  := $(word 2,$(OTP_FACTS))
OTP_ROOT  := $(word 3,$(OTP_FACTS))
ifeq ($(strip $(word 4,$(OTP_FACTS))),)
$(error the erl of $(OTP_PATH) did not answer c_src/build.sh facts, see the message above)
endif
# c_src/build.sh takes the OTP from the variables rebar3 gives its hooks:
# set them to the facts above, so that it need not ask erl again.
export ERLANG_TARGET := $(OTP_REL)
export ERLANG_ERTS_VER := $(ERTS_VSN)
export ERLANG_ROOT_DIR := $(OTP_ROOT)
export ERLANG_LIB_DIR_erl_interface := $(word 4,$(OTP_FACTS))

# Each OTP gets its own object and beam directories, so that switching
# between releases never mixes NIF API versions or beam formats.
B := build/erts-$(ERTS_VSN)
export REBAR_BASE_DIR := $(CURDIR)/_build/otp$(OTP_REL)
endif
REBAR ?= rebar3
# Warnings are errors in every Erlang compile of this project's builds and
# tests (rebar.config leaves them warnings, for dependents).
export ERL_COMPILER_OPTIONS := [warnings_as_errors]

# ---- C: what c_src/build.sh builds ---------------------------------------------
# The rooms of c_src/ (README.md, "Map of the tree"): lib, nif/common and
# each nif/<m> make priv/<m>.so; cat (with the lib pieces it uses and ei)
# makes priv/bin/tracekit-cat; each test_nif/<m> and bench_nif/<m> (with
# model) makes $(B)/test_nif/<m>.so or $(B)/bench_nif/<m>.so. The objects
# stay in $(B).
CLANG   ?= clang
SAN_ASAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_TSAN := -fsanitize=thread
# NIF_VARIANT=asan builds every NIF with AddressSanitizer and UBSan and the
# debug assertions, into $(B) = build/erts-<vsn>-asan (test-nif-asan).
NIF_VARIANT ?=
# The script's CC and CFLAGS are those of the environment (or its
# defaults), as in rebar3's hook: both builds then agree on what is in $(B).
ifeq ($(NIF_VARIANT),asan)
B := $(B)-asan
PRIV := $(B)/priv
NIF_EXTRA_CFLAGS := $(SAN_ASAN) -DTK_DEBUG
else
PRIV := priv
NIF_EXTRA_CFLAGS :=
endif
NIF_BUILD = TK_EXTRA_CFLAGS='$(NIF_EXTRA_CFLAGS)' $(BUILD) --obj $(B) --priv $(PRIV)
# tracekit-cat built by clang with AddressSanitizer and UBSan: what
# tracekit_cat_SUITE's damaged-file run uses when it is there.
CAT_ASAN_BUILD = CC='$(CLANG)' CFLAGS='-O1 -g' TK_EXTRA_CFLAGS='$(SAN_ASAN)' \
    $(BUILD) --obj $(B)/cat-asan --cat $(B)/cat-asan/tracekit-cat

# Where the Erlang side finds the NIFs: tracekit_nif:path/1 looks in
# TRACEKIT_NIF_DIR when it is set (the sanitizer build), else in priv/; the
# test and bench helpers look in $TRACEKIT_BUILD/test_nif and /bench_nif.
export TRACEKIT_BUILD := $(CURDIR)/$(B)
ifeq ($(NIF_VARIANT),asan)
export TRACEKIT_NIF_DIR := $(CURDIR)/$(PRIV)
endif

# ---- C tests of lib and model (no VM) ----------------------------------------
# Built with the debug assertions; the ASan build also checks for leaks.
CORE_SRC  := $(sort $(wildcard c_src/lib/*.c c_src/model/*.c))
CORE_HDR  := $(wildcard c_src/lib/*.h c_src/model/*.h)
CTEST_SRC := $(sort $(wildcard c_src/test/*.c))
CTEST_HDR := $(wildcard c_src/test/*.h)
CTEST_CFLAGS := $(C_BASE) -g -DTK_DEBUG -Ic_src/lib -Ic_src/model -Ic_src/test -pthread

build/ctest/plain/tk_tests: $(CTEST_SRC) $(CTEST_HDR) $(CORE_SRC) $(CORE_HDR)
	@mkdir -p $(@D)
	$(CC) $(CTEST_CFLAGS) -O2 $(CTEST_SRC) $(CORE_SRC) -o $@ -lpthread -lm
build/ctest/asan/tk_tests: $(CTEST_SRC) $(CTEST_HDR) $(CORE_SRC) $(CORE_HDR)
	@mkdir -p $(@D)
	$(CLANG) $(CTEST_CFLAGS) -O1 $(SAN_ASAN) $(CTEST_SRC) $(CORE_SRC) -o $@ -lpthread -lm
build/ctest/tsan/tk_tests: $(CTEST_SRC) $(CTEST_HDR) $(CORE_SRC) $(CORE_HDR)
	@mkdir -p $(@D)
	$(CLANG) $(CTEST_CFLAGS) -O1 $(SAN_TSAN) $(CTEST_SRC) $(CORE_SRC) -o $@ -lpthread -lm

# ---- C hot-path benchmark (instruction counts under callgrind) --------------
LIB_SRC := $(sort $(wildcard c_src/lib/*.c))
LIB_HDR := $(wildcard c_src/lib/*.h)
build/bench/bench_hot: c_src/bench/bench_hot.c $(LIB_SRC) $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(C_BASE) -O2 -g -Ic_src/lib -pthread $< $(LIB_SRC) -o $@ -lpthread -lm

# A qemu-user plugin that counts instructions (scripts/bench): its calls
# into qemu are resolved when qemu loads it.
build/bench/qemu_insns.so: c_src/bench/qemu_insns.c
	@mkdir -p $(@D)
	$(CC) $(C_BASE) -O2 -shared -fPIC $< -o $@ -Wl,--unresolved-symbols=ignore-all

# ---- targets ---------------------------------------------------------------
.PHONY: all nif cat cat-asan test-nifs bench-nifs beams test test-elixir test-c \
        test-c-asan test-c-tsan test-c-long eunit ct test-nif-asan test-all \
        test-package check dialyzer xref bench demo clean distclean otp-info \
        viewers-install test-viewers screenshots

all: nif cat beams

# c_src/build.sh decides what to make again (each call is cheap when
# nothing changed). cat, test-nifs and bench-nifs come after nif: they share
# its objects, which two builds at once (make -j) would both make.
nif:
	$(NIF_BUILD) nifs
cat: nif
	$(NIF_BUILD) cat
cat-asan:
	$(CAT_ASAN_BUILD) cat
test-nifs: nif
	$(NIF_BUILD) test-nifs
bench-nifs: nif
	$(NIF_BUILD) bench-nifs

beams: nif cat
	$(REBAR) compile

otp-info:
	@echo "OTP $(OTP_REL) (erts $(ERTS_VSN)) from $(OTP_PATH)"

# The C core tests need no VM: TEST_C= leaves them out (test-all runs them
# with the first OTP only).
TEST_C ?= test-c test-c-asan test-c-tsan
test: otp-info $(TEST_C) eunit ct test-elixir

test-c: build/ctest/plain/tk_tests
	$<

test-c-asan: build/ctest/asan/tk_tests
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $<

# Under TSan only the multi-threaded tests run (the others gain nothing).
test-c-tsan: build/ctest/tsan/tk_tests
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $< --threaded

# The long concurrency runs: not part of `make test`.
test-c-long: build/ctest/tsan/tk_tests build/ctest/asan/tk_tests
	TK_TEST_LONG=1 TSAN_OPTIONS=halt_on_error=1 build/ctest/tsan/tk_tests --threaded
	TK_TEST_LONG=1 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 build/ctest/asan/tk_tests --threaded

# The Elixir tests (scripts/test-elixir): ExUnit in a Mix project that
# depends on this tree; skipped, with a line, where Elixir cannot be had.
test-elixir: nif
	scripts/test-elixir

# EUNIT_ARGS / CT_ARGS select, for example CT_ARGS="--suite test/tracekit_SUITE".
eunit: nif test-nifs
	$(REBAR) eunit $(EUNIT_ARGS)

# tracekit_elixir_SUITE loads the Elixir of scripts/elixir (when there is
# one for this OTP) by code path.
ct: nif test-nifs cat cat-asan
	TRACEKIT_ELIXIR="$$(scripts/elixir path 2>/dev/null | tail -n 1)" $(REBAR) ct $(CT_ARGS)

# The NIFs built with AddressSanitizer and UBSan (NIF_VARIANT=asan), in real
# VMs: the sanitizer runtime of $(CC) is preloaded into every VM the tests
# start (the VM itself is not instrumented; +Mea min sends its allocations
# through malloc, where ASan sees them), which runs EUnit and every Common
# Test suite, the fuzzer (tracekit_fuzz_SUITE) with ASAN_FUZZ_ITERATIONS
# calls per case. Each report goes to a file in $(ASAN_LOGS) and fails the
# target; so does a VM killed by one. Leaks are not looked for: the VM does
# not free everything when it halts.
ASAN_FUZZ_ITERATIONS ?= 10000
ASAN_RUNTIME = $(firstword $(filter /%,$(foreach f,libasan.so \
    libclang_rt.asan-$(shell uname -m).so,$(shell $(CC) -print-file-name=$(f)))))
ASAN_LOGS = $(CURDIR)/$(B)/sanitizer
# ASan's dlopen interceptor hides the VM's own library path when the VM
# opens libsctp by name (an OTP from scripts/otp has it in its tree): a
# directory holding only that library goes on LD_LIBRARY_PATH.
ASAN_SCTP = $(firstword $(wildcard $(OTP_ROOT)/../*/libsctp.so.1))
ASAN_ENV = LD_PRELOAD=$(ASAN_RUNTIME) \
    LD_LIBRARY_PATH=$(ASAN_LOGS)/lib$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:handle_abort=1:log_path=$(ASAN_LOGS)/asan \
    UBSAN_OPTIONS=print_stacktrace=1:abort_on_error=1:log_path=$(ASAN_LOGS)/ubsan \
    ERL_FLAGS="+Mea min $$ERL_FLAGS" \
    TRACEKIT_FUZZ_ITERATIONS=$(ASAN_FUZZ_ITERATIONS)
ifeq ($(NIF_VARIANT),asan)
test-nif-asan: nif test-nifs
	@test -n "$(ASAN_RUNTIME)" || \
	  { echo "test-nif-asan: $(CC) has no AddressSanitizer runtime" >&2; exit 1; }
	$(REBAR) as test compile
	rm -rf $(ASAN_LOGS) && mkdir -p $(ASAN_LOGS)/lib
	$(if $(ASAN_SCTP),ln -s $(ASAN_SCTP) $(ASAN_LOGS)/lib/)
	@rc=0; \
	$(ASAN_ENV) $(REBAR) eunit $(EUNIT_ARGS) || rc=1; \
	$(ASAN_ENV) $(REBAR) ct $(CT_ARGS) || rc=1; \
	reports=`find $(ASAN_LOGS) -maxdepth 1 -type f`; \
	if [ -n "$$reports" ]; then \
	  cat $$reports; \
	  echo "test-nif-asan: sanitizer reports, above and in $(ASAN_LOGS)" >&2; exit 1; \
	fi; \
	[ $$rc = 0 ] || { echo "test-nif-asan: tests failed" >&2; exit 1; }; \
	echo "test-nif-asan: no sanitizer report"
else
test-nif-asan:
	$(MAKE) test-nif-asan NIF_VARIANT=asan
endif

test-all:
	OTP=27 $(MAKE) test
	OTP=29 $(MAKE) test TEST_C=

# tracekit as a project that depends on it gets it (scripts/check-package):
# with rebar3 and in a release, from a Hex-style tarball, with mix.
test-package:
	scripts/check-package

check: nif test-nifs dialyzer xref

dialyzer:
	$(REBAR) dialyzer

xref:
	$(REBAR) xref

bench: all bench-nifs build/bench/bench_hot build/bench/qemu_insns.so
	$(REBAR) as bench compile
	scripts/bench

demo: all
	$(REBAR) as demo compile
	scripts/demo

# The exports and the HTML report in real viewers (test/viewers): Chromium
# (Debian package, installed with apt-get when missing) drives speedscope
# (npm, into build/viewers) through puppeteer-core; screenshots regenerates
# the pictures of README.md from the same run. The driver is kept as .erl.src
# so that rebar3, which copies test/ whole, does not take it for a test module.
VIEWERS := $(CURDIR)/build/viewers
VIEWERS_NPM := speedscope@1.25.0 puppeteer-core@24.43.1
VIEWERS_SHOTS ?= -
# (The emoji font: speedscope's toolbar draws its icons with it.)
viewers-install:
	@command -v chromium >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && \
	  test -e /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  $$(command -v chromium >/dev/null || echo chromium) \
	  $$(command -v npm >/dev/null || echo nodejs npm) fonts-noto-color-emoji >/dev/null; }
	@test -d $(VIEWERS)/node_modules/speedscope -a -d $(VIEWERS)/node_modules/puppeteer-core || \
	  npm install --prefix $(VIEWERS) --no-audit --no-fund --no-save $(VIEWERS_NPM)
test-viewers: beams viewers-install
	rm -rf $(VIEWERS)/out && mkdir -p $(VIEWERS)/ebin $(VIEWERS)/src
	cp test/viewers/tracekit_viewers.erl.src $(VIEWERS)/src/tracekit_viewers.erl
	erlc -o $(VIEWERS)/ebin $(VIEWERS)/src/tracekit_viewers.erl
	@echo "test-viewers: the known workload and the sample suite (log: $(VIEWERS)/workload.log)"
	@erl -noshell -pa $(VIEWERS)/ebin -pa $(REBAR_BASE_DIR)/default/lib/tracekit/ebin \
	  -run tracekit_viewers main $(VIEWERS)/out \
	  test/tracekit_cth_SUITE_data/tracekit_cth_sample_SUITE.erl.src \
	  > $(VIEWERS)/workload.log 2>&1 || { tail -40 $(VIEWERS)/workload.log; exit 1; }
	node test/viewers/check.cjs $(VIEWERS) $(VIEWERS)/out $(VIEWERS_SHOTS)
screenshots:
	$(MAKE) test-viewers VIEWERS_SHOTS=$(CURDIR)/test/viewers/screenshots

# The objects of every OTP, what they made, and the beams of tracekit itself
# (distclean: everything rebar3 made).
clean:
	rm -rf build priv/*.so priv/bin _build/*/*/lib/tracekit

distclean: clean
	rm -rf _build
