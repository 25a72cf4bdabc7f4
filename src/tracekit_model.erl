%% @doc The C core's models of the VM's tracing machinery, callable from
%% Erlang: seq_trace tokens and serials, trace sessions, breakpoints.
%%
%% These exist for the differential tests (the same scenario runs on the VM
%% and on the model, and both must agree) and for tools that reason about
%% trace data offline. Each model's functions are in their own section.
-module(tracekit_model).

-on_load(init/0).

%% Breakpoint model (its section below).
-export([bp_new/1, bp_function/5, bp_info/4, bp_flags/3, bp_call/3]).
-export_type([bp_model/0, bp_session/0]).

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

%%% ---- seq_trace model ------------------------------------------------------

%%% ---- trace session model --------------------------------------------------

%%% ---- breakpoint model -----------------------------------------------------
%%%
%%% A model of the VM's breakpoints (beam_bp.c): per function and session a
%%% breakpoint with two generations of data, changed through the VM's
%%% sequence (stage, install, commit, uninstall, consolidate, free) with a
%%% grace period between the steps. The model knows a fixed table of
%%% functions; sessions are small integers standing for trace sessions.

-type bp_model() :: reference().
%% A breakpoint model (a NIF resource).
-type bp_session() :: 0..63.
%% A session of the model.

%% @doc A model of the functions `Funcs', each with whether it is exported
%% (global call trace applies to exported functions only), none traced.
%% Use the functions of real modules (`M:module_info(functions)') so that
%% patterns match the same functions in the model and on the VM.
-spec bp_new([{mfa(), Exported :: boolean()}, ...]) -> bp_model().
bp_new(_Funcs) ->
    erlang:nif_error(not_loaded).

%% @doc `trace:function(Session, MFA, Pattern, Flags)' on the model: stages
%% the change for every matching function and runs the whole change
%% sequence. Returns the number of matching functions the way the VM counts
%% them (exported ones only for global tracing). Raises `badarg' where the
%% VM does (unknown flag, `global' with breakpoint flags, a match spec with
%% only call_count/call_time/call_memory), and for `{meta, Tracer}' (a
%% session with a tracer refuses it) and atom MFAs (`on_load', events: not
%% modelled). Match specs are not compiled: any list is one.
-spec bp_function(bp_model(), bp_session(),
                  {module() | '_', atom(), arity() | '_'},
                  boolean() | restart | pause | list(),
                  [local | meta | global | call_count | call_time |
                   call_memory]) -> non_neg_integer().
bp_function(_Model, _Session, _MFA, _Pattern, _Flags) ->
    erlang:nif_error(not_loaded).

%% @doc `trace:info(Session, MFA, Item)' on the model for `call_count'
%% (`{call_count, N | false}') and `traced' (`{traced, global | local |
%% false}'); `undefined' for a function the model does not have.
-spec bp_info(bp_model(), bp_session(), mfa(), call_count) ->
          {call_count, non_neg_integer() | false | undefined};
             (bp_model(), bp_session(), mfa(), traced) ->
          {traced, global | local | false | undefined}.
bp_info(_Model, _Session, _MFA, _Item) ->
    erlang:nif_error(not_loaded).

%% @doc The breakpoint flags of `Session' on `MFA' in the active and the
%% staging generation (the bit values of beam_bp.c: local 1, meta 2, count
%% 4, count active 8, time 32, time active 64, global 128, memory 256,
%% memory active 512), or `undefined' for a function the model does not
%% have. Between changes both are equal.
-spec bp_flags(bp_model(), bp_session(), mfa()) ->
          {Active :: non_neg_integer(), Staging :: non_neg_integer()} |
          undefined.
bp_flags(_Model, _Session, _MFA) ->
    erlang:nif_error(not_loaded).

%% @doc Executes `MFA' `N' times in the model, as local calls by a process
%% that is call traced in no session: counts where call_count is active.
%% Raises `badarg' for a function the model does not have.
-spec bp_call(bp_model(), mfa(), non_neg_integer()) -> ok.
bp_call(_Model, _MFA, _N) ->
    erlang:nif_error(not_loaded).
