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
-nifs([bp_new/1, bp_function/5, bp_info/4, bp_flags/3, bp_call/3]).

%% Trace session model (its functions are in their section below).
-export([session_new/1, session_add_function/3, session_create/4,
         session_destroy/3, session_spawn/3, session_open_port/1,
         session_exit/2, session_link/3, session_unlink/3,
         session_process/6, session_port/6, session_function/5,
         session_send/4, session_recv/4, session_call/2, session_info/4,
         session_session_info/2, session_union/2]).

-export_type([session_model/0, session_tracee/0, session_ms/0]).

-nifs([session_new/1, session_add_function/3, session_create/4,
       session_destroy/3, session_spawn/3, session_open_port/1,
       session_exit/2, session_link/3, session_unlink/3,
       session_process/6, session_port/6, session_function/5,
       session_send/4, session_recv/4, session_call/2, session_info/4,
       session_session_info/2, session_union/2]).

-opaque session_model() :: reference().
-type session_tracee() :: {tracee, non_neg_integer()}.
%% A match specification argument: `{ms, Key}' stands for a valid match
%% specification; any other term than these does not compile.
-type session_ms() :: term(). % true, false, [], restart, pause, {ms, Key}
-type session_badarg() :: badarg.

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

%%% ---- seq_trace model ------------------------------------------------------

%%% ---- trace session model --------------------------------------------------
%%
%% A model of OTP 27+ trace sessions (c_src/core/tk_session.h). The model
%% speaks of entities by small ids: sessions by the id session_create/4
%% gives (the legacy session is 0), processes and ports as {tracee, Id},
%% tracers as {tracer, Key} and match specifications as {ms, Key} with keys
%% the caller chooses. Each operation answers what the VM answers for the
%% same step, with the atom `badarg' where the VM raises badarg.

%% @doc A model of a node of OTP release `Release' (27, 29, ...): only the
%% legacy session, no tracees, no functions.
-spec session_new(pos_integer()) -> session_model().
session_new(_Release) ->
    erlang:nif_error(not_loaded).

%% @doc Registers a function of a loaded module; module-wide patterns need
%% all functions of the module. Answers the function id.
-spec session_add_function(session_model(), mfa(), boolean()) ->
          non_neg_integer().
session_add_function(_Model, _MFA, _Exported) ->
    erlang:nif_error(not_loaded).

%% @doc trace:session_create(Name, Tracer, Opts) with tracer `TracerKey';
%% `ArgsOk' is false where the VM rejects the arguments themselves. Answers
%% the session id and its weak id (from 0 in each model).
-spec session_create(session_model(), atom(), non_neg_integer(), boolean()) ->
          {pos_integer(), non_neg_integer()} | session_badarg().
session_create(_Model, _Name, _TracerKey, _ArgsOk) ->
    erlang:nif_error(not_loaded).

%% @doc trace:session_destroy/1 by the handle, or by the weak ref
%% {Name, WeakId} when `ByWeakRef'.
-spec session_destroy(session_model(), non_neg_integer(), boolean()) ->
          boolean() | session_badarg().
session_destroy(_Model, _Sid, _ByWeakRef) ->
    erlang:nif_error(not_loaded).

%% @doc A process spawned by `Parent' (`none': by a process outside the
%% model), linked to it when `Link'.
-spec session_spawn(session_model(), session_tracee() | none, boolean()) ->
          session_tracee() | session_badarg().
session_spawn(_Model, _Parent, _Link) ->
    erlang:nif_error(not_loaded).

%% @doc A port is opened.
-spec session_open_port(session_model()) -> session_tracee().
session_open_port(_Model) ->
    erlang:nif_error(not_loaded).

%% @doc A process exits or a port closes.
-spec session_exit(session_model(), session_tracee()) -> ok | session_badarg().
session_exit(_Model, _Tracee) ->
    erlang:nif_error(not_loaded).

%% @doc Process `A' calls link(B).
-spec session_link(session_model(), session_tracee(), session_tracee()) ->
          ok | session_badarg().
session_link(_Model, _A, _B) ->
    erlang:nif_error(not_loaded).

%% @doc Process `A' calls unlink(B).
-spec session_unlink(session_model(), session_tracee(), session_tracee()) ->
          ok | session_badarg().
session_unlink(_Model, _A, _B) ->
    erlang:nif_error(not_loaded).

%% @doc trace:process(S, Spec, How, Flags). `Spec' is a tracee or one of the
%% atoms trace:process/4 takes; `ProcessCount' is the number of processes
%% the VM has at the call (the answer for all/existing when processes are
%% visited).
-spec session_process(session_model(), non_neg_integer(), term(), term(),
                      term(), non_neg_integer()) ->
          non_neg_integer() | session_badarg().
session_process(_Model, _Sid, _Spec, _How, _Flags, _ProcessCount) ->
    erlang:nif_error(not_loaded).

%% @doc trace:port(S, Spec, How, Flags), with the VM's number of ports.
-spec session_port(session_model(), non_neg_integer(), term(), term(),
                   term(), non_neg_integer()) ->
          non_neg_integer() | session_badarg().
session_port(_Model, _Sid, _Spec, _How, _Flags, _PortCount) ->
    erlang:nif_error(not_loaded).

%% @doc trace:function(S, Target, MatchSpec, Flags).
-spec session_function(session_model(), non_neg_integer(), term(),
                       session_ms(), term()) ->
          non_neg_integer() | session_badarg().
session_function(_Model, _Sid, _Target, _MatchSpec, _Flags) ->
    erlang:nif_error(not_loaded).

%% @doc trace:send(S, MatchSpec, Flags).
-spec session_send(session_model(), non_neg_integer(), session_ms(), term()) ->
          1 | session_badarg().
session_send(_Model, _Sid, _MatchSpec, _Flags) ->
    erlang:nif_error(not_loaded).

%% @doc trace:recv(S, MatchSpec, Flags).
-spec session_recv(session_model(), non_neg_integer(), session_ms(), term()) ->
          1 | session_badarg().
session_recv(_Model, _Sid, _MatchSpec, _Flags) ->
    erlang:nif_error(not_loaded).

%% @doc One call of a registered function (by any process).
-spec session_call(session_model(), non_neg_integer()) -> ok | session_badarg().
session_call(_Model, _FunctionId) ->
    erlang:nif_error(not_loaded).

%% @doc trace:info(S, What, Item): `undefined', `{Item, Value}' as the VM
%% answers with tracers, match specifications and tracees in the model's
%% terms (per-process call_time and call_memory data is `call_data').
-spec session_info(session_model(), non_neg_integer(), term(), term()) ->
          undefined | {term(), term()} | session_badarg().
session_info(_Model, _Sid, _What, _Item) ->
    erlang:nif_error(not_loaded).

%% @doc trace:session_info(What): the sessions as {Name, WeakId}, the
%% legacy session as {legacy, default}.
-spec session_session_info(session_model(), term()) ->
          [{atom(), non_neg_integer() | default}] | undefined
          | session_badarg().
session_session_info(_Model, _What) ->
    erlang:nif_error(not_loaded).

%% @doc The OR of a live process's flags over all sessions, in the VM's
%% bits: what process_info(Pid, trace) answers.
-spec session_union(session_model(), session_tracee()) ->
          non_neg_integer() | undefined.
session_union(_Model, _Tracee) ->
    erlang:nif_error(not_loaded).


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
