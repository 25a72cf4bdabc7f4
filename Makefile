# tracekit build.
#
#   make            NIFs into priv/ and beams (through rebar3)
#   make test       C core tests, the same under ASan+UBSan and TSan, EUnit, CT
#   make test-all   `make test` on OTP 27, then on OTP 29
#   make check      dialyzer and xref
#   make bench      benchmarks (not part of the tests)
#   make demo       the demonstration run of README.md
#   make test-viewers  exports and the HTML report checked in headless Chromium
#
# OTP=27|29 selects the release (see scripts/otp); without it, the PATH's
# erl is used when it is release 27 or newer, else OTP 29 is provisioned.

SHELL := /bin/sh
.SUFFIXES:
.DELETE_ON_ERROR:
.DEFAULT_GOAL := all

# ---- OTP selection (done once per make invocation) -------------------------
# $(shell) does not see make's variables: pass OTP on explicitly.
OTP_PATH := $(shell OTP='$(OTP)' scripts/otp path)
ifeq ($(strip $(OTP_PATH)),)
$(error no usable Erlang/OTP: scripts/otp failed, see the message above)
endif
export PATH := $(OTP_PATH):$(PATH)
OTP_ERL_LIBS := $(shell OTP='$(OTP)' PATH='$(OTP_PATH)':"$$PATH" scripts/otp erl-libs)
ifneq ($(strip $(OTP_ERL_LIBS)),)
export ERL_LIBS := $(OTP_ERL_LIBS)$(if $(ERL_LIBS),:$(ERL_LIBS))
endif

# "<otp release> <erts version> <erts include dir> <ei include> <ei lib>"
OTP_FACTS := $(shell PATH='$(OTP_PATH)':"$$PATH" erl -noshell -noinput -eval '\
    Root = code:root_dir(), \
    io:format("~s ~s ~s/erts-~s/include ~s ~s", \
      [erlang:system_info(otp_release), erlang:system_info(version), \
       Root, erlang:system_info(version), \
       code:lib_dir(erl_interface, include), \
       code:lib_dir(erl_interface, lib)]), halt().')
OTP_REL      := $(word 1,$(OTP_FACTS))
ERTS_VSN     := $(word 2,$(OTP_FACTS))
ERTS_INCLUDE := $(word 3,$(OTP_FACTS))
EI_INCLUDE   := $(word 4,$(OTP_FACTS))
EI_LIB       := $(word 5,$(OTP_FACTS))
ifeq ($(strip $(ERTS_VSN)),)
$(error erl on PATH ($(OTP_PATH)) did not answer)
endif

# Each OTP gets its own object and beam directories, so that switching
# between releases never mixes NIF API versions or beam formats.
B := build/erts-$(ERTS_VSN)
export REBAR_BASE_DIR := $(CURDIR)/_build/otp$(OTP_REL)
REBAR ?= rebar3

# priv/*.so are relinked when the OTP they were built for changes: this stamp
# is rewritten only when its content would differ.
OTP_STAMP := build/priv-erts
$(shell mkdir -p build; \
  [ "`cat $(OTP_STAMP) 2>/dev/null`" = "$(ERTS_VSN)" ] || echo $(ERTS_VSN) > $(OTP_STAMP))

# ---- C ---------------------------------------------------------------------
# The sources live in rooms by role (README.md, "Design"):
#   c_src/lib/        plain C the shipped NIFs use   -> $(B)/libtk.a
#   c_src/model/      plain C models of the VM       -> $(B)/libtkmodel.a
#   c_src/nif/common/ NIF-side code the NIFs share   -> $(B)/libtknif.a
#   c_src/nif/<m>/       a shipped NIF library        -> priv/<m>.so
#   c_src/test_nif/<m>/  a NIF only the tests load    -> $(B)/test_nif/<m>.so
#   c_src/bench_nif/<m>/ a NIF only the benchmarks load -> $(B)/bench_nif/<m>.so
#   c_src/test/       C tests of lib and model (no VM)
#   c_src/bench/      C benchmarks of lib
# Each .so links its own objects and the archives: the linker takes from an
# archive only the objects the library uses.
CC      ?= cc
CLANG   ?= clang
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror
CFLAGS  ?= -O2 -g
# NIF_VARIANT=asan builds every NIF with AddressSanitizer and UBSan and the
# debug assertions, into $(B) = build/erts-<vsn>-asan (test-nif-asan).
NIF_VARIANT ?=
ifeq ($(NIF_VARIANT),asan)
B := $(B)-asan
PRIV := $(B)/priv
VARIANT_CFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
                  -fno-omit-frame-pointer -DTK_DEBUG
else
PRIV := priv
VARIANT_CFLAGS :=
endif
NIF_CFLAGS := $(CSTD) $(WARN) $(CFLAGS) $(VARIANT_CFLAGS) -fvisibility=hidden \
              -fPIC -I$(ERTS_INCLUDE) -I$(EI_INCLUDE) -Ic_src/lib -Ic_src/model \
              -Ic_src/nif/common
NIF_LDFLAGS := -shared -lpthread $(VARIANT_CFLAGS)

LIB_HDR  := $(wildcard c_src/lib/*.h)
obj_of    = $(patsubst c_src/%.c,$(B)/obj/%.o,$(1))
ARCHIVES := $(B)/libtknif.a $(B)/libtkmodel.a $(B)/libtk.a

$(B)/obj/%.o: c_src/%.c
	@mkdir -p $(@D)
	$(CC) $(NIF_CFLAGS) -MMD -MP -c $< -o $@

$(B)/libtk.a: $(call obj_of,$(sort $(wildcard c_src/lib/*.c)))
$(B)/libtkmodel.a: $(call obj_of,$(sort $(wildcard c_src/model/*.c)))
$(B)/libtknif.a: $(call obj_of,$(sort $(wildcard c_src/nif/common/*.c)))
$(ARCHIVES):
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

# nif_rule ROOM OUTDIR M: the rule making OUTDIR/M.so from c_src/ROOM/M/.
# A NIF directory that links ei names it in a file `uses_ei` beside its
# sources.
define nif_rule
$(2)/$(3).so: $(call obj_of,$(wildcard c_src/$(1)/$(3)/*.c)) $(ARCHIVES) $(OTP_STAMP)
	@mkdir -p $$(@D)
	$$(CC) $$(filter %.o,$$^) $(ARCHIVES) -o $$@ $$(NIF_LDFLAGS) $(if $(wildcard c_src/$(1)/$(3)/uses_ei),-L$(EI_LIB) -lei)
endef
nif_names = $(notdir $(patsubst %/,%,$(filter-out c_src/nif/common/,$(sort $(dir $(wildcard c_src/$(1)/*/*.c))))))
$(foreach n,$(call nif_names,nif),$(eval $(call nif_rule,nif,$(PRIV),$(n))))
$(foreach n,$(call nif_names,test_nif),$(eval $(call nif_rule,test_nif,$(B)/test_nif,$(n))))
$(foreach n,$(call nif_names,bench_nif),$(eval $(call nif_rule,bench_nif,$(B)/bench_nif,$(n))))
NIF_SOS       := $(patsubst %,$(PRIV)/%.so,$(call nif_names,nif))
TEST_NIF_SOS  := $(patsubst %,$(B)/test_nif/%.so,$(call nif_names,test_nif))
BENCH_NIF_SOS := $(patsubst %,$(B)/bench_nif/%.so,$(call nif_names,bench_nif))

-include $(shell find $(B) -name '*.d' 2>/dev/null)

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
CTEST_CFLAGS := $(CSTD) $(WARN) -g -DTK_DEBUG -Ic_src/lib -Ic_src/model -Ic_src/test -pthread
SAN_ASAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_TSAN := -fsanitize=thread

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
build/bench/bench_hot: c_src/bench/bench_hot.c $(LIB_SRC) $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O2 -g -Ic_src/lib -pthread $< $(LIB_SRC) -o $@ -lpthread -lm

# ---- tracekit-cat: trace files read without a VM -----------------------------
# c_src/cat/ links only ei (erl_interface) from OTP and the libtk.a pieces
# it uses (chunk framing, record format, CRC, tags); never erts. The asan
# variant ($(B)/cat-asan/) is what tracekit_cat_SUITE's damaged-file run
# uses when it is there.
CAT_SRC    := $(sort $(wildcard c_src/cat/*.c))
CAT_HDR    := $(wildcard c_src/cat/*.h)
CAT_LIB    := $(addprefix c_src/lib/,tk_tfile.c tk_term.c tk_ext.c tk_crc32c.c tk_mem.c tk_tags.c)
# (The text follows the io_lib_pretty of the OTP it is built against.)
CAT_CFLAGS := $(CSTD) $(WARN) -DTK_OTP_RELEASE=$(OTP_REL) -I$(EI_INCLUDE) -Ic_src/lib -Ic_src/cat
CAT_BIN    := priv/bin/tracekit-cat
CAT_ASAN   := $(B)/cat-asan/tracekit-cat

$(B)/obj/cat/%.o: c_src/cat/%.c
	@mkdir -p $(@D)
	$(CC) $(CAT_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(CAT_BIN): $(call obj_of,$(CAT_SRC)) $(B)/libtk.a $(OTP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(filter %.o,$^) $(B)/libtk.a -o $@ -L$(EI_LIB) -lei -lpthread -lm

$(CAT_ASAN): $(CAT_SRC) $(CAT_HDR) $(CAT_LIB) $(LIB_HDR) $(OTP_STAMP)
	@mkdir -p $(@D)
	$(CLANG) $(CAT_CFLAGS) -O1 -g $(SAN_ASAN) $(CAT_SRC) $(CAT_LIB) -o $@ \
	  -L$(EI_LIB) -lei -lpthread -lm

cat: $(CAT_BIN)
cat-asan: $(CAT_ASAN)

# ---- targets ---------------------------------------------------------------
.PHONY: all nif test-nifs bench-nifs beams test test-c test-c-asan test-c-tsan \
        test-c-long eunit ct test-nif-asan test-all check dialyzer xref bench \
        demo clean distclean otp-info cat cat-asan \
        viewers-install test-viewers screenshots

all: nif cat beams

# What a user of the package needs: the shipped NIFs, into priv/ (and
# nothing else: libraries left there by an older layout are removed).
nif: $(NIF_SOS)
	@rm -f $(filter-out $(NIF_SOS),$(wildcard $(PRIV)/*.so))
test-nifs: $(TEST_NIF_SOS)
bench-nifs: $(BENCH_NIF_SOS)

beams: nif
	$(REBAR) compile

otp-info:
	@echo "OTP $(OTP_REL) (erts $(ERTS_VSN)) from $(OTP_PATH)"

test: otp-info test-c test-c-asan test-c-tsan eunit ct

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

# EUNIT_ARGS / CT_ARGS select, for example CT_ARGS="--suite test/tracekit_SUITE".
eunit: nif test-nifs
	$(REBAR) eunit $(EUNIT_ARGS)

ct: nif test-nifs cat cat-asan
	$(REBAR) ct $(CT_ARGS)

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
ASAN_SCTP = $(firstword $(wildcard $(ERTS_INCLUDE)/../../../*/libsctp.so.1))
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
	OTP=29 $(MAKE) test

check: nif test-nifs dialyzer xref

dialyzer:
	$(REBAR) dialyzer

xref:
	$(REBAR) xref

bench: all bench-nifs build/bench/bench_hot
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

clean:
	rm -rf build priv/*.so priv/bin
	$(REBAR) clean

distclean:
	rm -rf build priv/*.so _build
