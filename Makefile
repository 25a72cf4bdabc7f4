# tracekit build.
#
#   make            NIFs into priv/ and beams (through rebar3)
#   make test       C core tests, the same under ASan+UBSan and TSan, EUnit, CT
#   make test-all   `make test` on OTP 27, then on OTP 29
#   make check      dialyzer and xref
#   make bench      benchmarks (not part of the tests)
#   make demo       the demonstration run of README.md
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
CC      ?= cc
CLANG   ?= clang
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror
CFLAGS  ?= -O2 -g
NIF_CFLAGS := $(CSTD) $(WARN) $(CFLAGS) -fvisibility=hidden -fPIC \
              -I$(ERTS_INCLUDE) -Ic_src/core -Ic_src/nif/common
NIF_LDFLAGS := -shared -lpthread

CORE_SRC := $(sort $(wildcard c_src/core/*.c))
CORE_HDR := $(wildcard c_src/core/*.h)
NIF_COMMON_SRC := $(sort $(wildcard c_src/nif/common/*.c))
NIFS     := $(notdir $(patsubst %/,%,$(filter-out c_src/nif/common/,$(sort $(dir $(wildcard c_src/nif/*/*.c))))))
NIF_SOS  := $(NIFS:%=priv/%.so)
# NIF directories that use ei name it in a file `uses_ei` beside their sources.
uses_ei   = $(wildcard c_src/nif/$(1)/uses_ei)

CORE_OBJ := $(CORE_SRC:c_src/core/%.c=$(B)/core/%.o)
NIF_COMMON_OBJ := $(NIF_COMMON_SRC:c_src/nif/common/%.c=$(B)/nif/common/%.o)
nif_objs = $(patsubst c_src/nif/%.c,$(B)/nif/%.o,$(wildcard c_src/nif/$(1)/*.c))

$(B)/core/%.o: c_src/core/%.c
	@mkdir -p $(@D)
	$(CC) $(NIF_CFLAGS) -MMD -MP -c $< -o $@

$(B)/nif/%.o: c_src/nif/%.c
	@mkdir -p $(@D)
	$(CC) $(NIF_CFLAGS) $(if $(call uses_ei,$(firstword $(subst /, ,$*))),-I$(EI_INCLUDE)) -MMD -MP -c $< -o $@

define nif_rule
priv/$(1).so: $(call nif_objs,$(1)) $(CORE_OBJ) $(NIF_COMMON_OBJ) $(OTP_STAMP)
	@mkdir -p priv
	$$(CC) $$(filter %.o,$$^) -o $$@ $$(NIF_LDFLAGS) $(if $(call uses_ei,$(1)),-L$(EI_LIB) -lei)
endef
$(foreach n,$(NIFS),$(eval $(call nif_rule,$(n))))

-include $(shell find $(B) -name '*.d' 2>/dev/null)

# ---- C tests of the core (no VM) -------------------------------------------
CTEST_SRC := $(sort $(wildcard c_src/test/*.c))
CTEST_HDR := $(wildcard c_src/test/*.h)
CTEST_CFLAGS := $(CSTD) $(WARN) -g -Ic_src/core -Ic_src/test -pthread
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
build/bench/bench_hot: c_src/bench/bench_hot.c $(CORE_SRC) $(CORE_HDR)
	@mkdir -p $(@D)
	$(CC) $(CSTD) $(WARN) -O2 -g -Ic_src/core -pthread $< $(CORE_SRC) -o $@ -lpthread -lm

# ---- targets ---------------------------------------------------------------
.PHONY: all nif beams test test-c test-c-asan test-c-tsan test-c-long eunit ct \
        test-all check dialyzer xref bench demo clean distclean otp-info

all: nif beams

nif: $(NIF_SOS)

beams: nif
	$(REBAR) compile

otp-info:
	@echo "OTP $(OTP_REL) (erts $(ERTS_VSN)) from $(OTP_PATH)"

test: otp-info test-c test-c-asan test-c-tsan eunit ct

test-c: build/ctest/plain/tk_tests
	$<

test-c-asan: build/ctest/asan/tk_tests
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $<

# Under TSan only the multi-threaded tests run (the others gain nothing).
test-c-tsan: build/ctest/tsan/tk_tests
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $< --threaded

# The long concurrency runs: not part of `make test`.
test-c-long: build/ctest/tsan/tk_tests build/ctest/asan/tk_tests
	TK_TEST_LONG=1 TSAN_OPTIONS=halt_on_error=1 build/ctest/tsan/tk_tests --threaded
	TK_TEST_LONG=1 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 build/ctest/asan/tk_tests --threaded

eunit: nif
	$(REBAR) eunit

ct: nif
	$(REBAR) ct

test-all:
	OTP=27 $(MAKE) test
	OTP=29 $(MAKE) test

check: nif dialyzer xref

dialyzer:
	$(REBAR) dialyzer

xref:
	$(REBAR) xref

bench: all build/bench/bench_hot
	$(REBAR) as bench compile
	scripts/bench

demo: all
	scripts/demo

clean:
	rm -rf build priv/*.so
	$(REBAR) clean

distclean:
	rm -rf build priv/*.so _build
