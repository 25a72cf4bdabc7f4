%% @doc The C core's models of the VM's tracing machinery, callable from
%% Erlang: seq_trace tokens and serials, trace sessions, breakpoints.
%%
%% These exist for the differential tests (the same scenario runs on the VM
%% and on the model, and both must agree): a test module, whose NIF
%% library is built outside priv/ (see tk_test_nif). Each model's functions
%% are in their own section.
-module(tracekit_model).

-on_load(init/0).

%% Calls per bp_call_chunk/3 NIF call (the C side refuses more).
-define(BP_CHUNK, 100000).

%% seq_trace model (its functions are in their section below).
-export([seq_new/1, seq_set_tracer/2, seq_add/2, seq_counters/2,
         seq_set_token/3, seq_set_token/4, seq_get_token/2, seq_get_token/3,
         seq_print/3, seq_print/4, seq_send/4, seq_deliver/3, seq_receive/3,
         seq_queue/2, seq_spawn/4, seq_link/3, seq_exit/3, seq_reset/1,
         seq_events/1, seq_send_untokened/2]).
-export_type([seq_world/0, seq_tracer/0, seq_msg_ref/0]).

-nifs([seq_new/1, seq_set_tracer/2, seq_add/2, seq_counters/2,
       seq_set_token/4, seq_set_token_fields/6, seq_get_token/2,
       seq_get_token/3, seq_print/3, seq_print/4, seq_send/4, seq_deliver/3,
       seq_receive/3, seq_queue/2, seq_spawn/4, seq_link/3, seq_exit/3,
       seq_reset/1, seq_events/1, seq_send_untokened/2]).

%% Breakpoint model (its section below).
-export([bp_new/1, bp_function/5, bp_info/4, bp_flags/3, bp_call/3]).
-export_type([bp_model/0, bp_session/0]).
-nifs([bp_new/1, bp_function/5, bp_info/4, bp_flags/3, bp_call_chunk/3]).

%% The event limits of the trace file's writer (tk_limit).
-export([limit_run/4]).
-nifs([limit_run/4]).

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
    erlang:load_nif(tk_test_nif:path(?MODULE), 0).

%%% ---- seq_trace model ------------------------------------------------------
%%
%% A world of model processes with seq_trace tokens, clocks and lastcnts,
%% the messages queued for them and the seq_trace events the VM would give
%% the system seq tracer (c_src/core/tk_seq.h has every rule). Processes are
%% named by any term (a test names them by the pids of the processes it runs
%% for real, so that tokens and events compare directly). Operations return
%% what the VM's seq_trace functions return and raise badarg where they do;
%% misuse of the model raises `{no_process, Name}', `{dead_process, Name}',
%% `{no_message, Ref}' or `{already_exists, Name}'.

-opaque seq_world() :: reference().
%% What the system seq tracer does: there is none (serials advance, no
%% events), it answers `trace' (serials advance, events), or it answers
%% anything else (serials do not advance, no events).
-type seq_tracer() :: none | accept | refuse.
-type seq_msg_ref() :: pos_integer().
-type seq_token() :: [] | {non_neg_integer(), term(), integer(), term(), integer()}.

%% @doc A world without processes, with the given system seq tracer.
-spec seq_new(seq_tracer()) -> seq_world().
seq_new(_Tracer) ->
    erlang:nif_error(not_loaded).

%% @doc Changes what the system seq tracer does.
-spec seq_set_tracer(seq_world(), seq_tracer()) -> ok.
seq_set_tracer(_World, _Tracer) ->
    erlang:nif_error(not_loaded).

%% @doc Adds a live process named `Name' without token, clock and lastcnt
%% 0 (a process spawned by one without token).
-spec seq_add(seq_world(), term()) -> ok.
seq_add(_World, _Name) ->
    erlang:nif_error(not_loaded).

%% @doc The process's clock and lastcnt words (64-bit, unsigned). The VM
%% shows them only through the serials they produce.
-spec seq_counters(seq_world(), term()) -> {non_neg_integer(), non_neg_integer()}.
seq_counters(_World, _Name) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:set_token(Token)' run by `Name': `[]' empties the token
%% and returns the previous one; a token tuple sets its label, then its
%% serial (badarg, with the label set, unless both counters are small
%% integers), then its six flags, and returns `ok'. Like seq_trace, a
%% non-integer Flags raises badarith and any other term function_clause.
-spec seq_set_token(seq_world(), term(), seq_token()) -> seq_token() | ok.
seq_set_token(World, Name, []) ->
    seq_set_token(World, Name, sequential_trace_token, []);
seq_set_token(World, Name, {Flags, Label, Serial, _From, LastCnt}) ->
    seq_set_token_fields(World, Name, Flags band 63, Label, Serial, LastCnt).

seq_set_token_fields(_World, _Name, _Flags, _Label, _Serial, _LastCnt) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:set_token(Component, Value)' run by `Name'; returns the
%% previous value.
-spec seq_set_token(seq_world(), term(), atom(), term()) -> term().
seq_set_token(_World, _Name, _Component, _Value) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:get_token()' of `Name'.
-spec seq_get_token(seq_world(), term()) -> seq_token().
seq_get_token(_World, _Name) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:get_token(Component)' of `Name'.
-spec seq_get_token(seq_world(), term(), atom()) -> [] | {atom(), term()}.
seq_get_token(_World, _Name, _Component) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:print(Info)' run by `Name'.
-spec seq_print(seq_world(), term(), term()) -> ok.
seq_print(_World, _Name, _Info) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:print(Label, Info)' run by `Name'.
-spec seq_print(seq_world(), term(), term(), term()) -> ok.
seq_print(_World, _Name, _Label, _Info) ->
    erlang:nif_error(not_loaded).

%% @doc `To ! Msg' run by `From'. Returns the reference of the message now
%% queued for `To', or `none' when `To' is dead (then nothing happens).
-spec seq_send(seq_world(), term(), term(), term()) -> seq_msg_ref() | none.
seq_send(_World, _From, _To, _Msg) ->
    erlang:nif_error(not_loaded).

%% @doc A message that carries no token information (a timer's, a
%% monitor's `DOWN', one sent with {@link seq_send_untokened/2}) reaches
%% `To'.
-spec seq_deliver(seq_world(), term(), term()) -> seq_msg_ref().
seq_deliver(_World, _To, _Msg) ->
    erlang:nif_error(not_loaded).

%% @doc `Name' receives the queued message `Ref'; returns the message.
-spec seq_receive(seq_world(), term(), seq_msg_ref()) -> term().
seq_receive(_World, _Name, _Ref) ->
    erlang:nif_error(not_loaded).

%% @doc The messages queued for `Name', oldest first.
-spec seq_queue(seq_world(), term()) -> [{seq_msg_ref(), term()}].
seq_queue(_World, _Name) ->
    erlang:nif_error(not_loaded).

%% @doc `Parent' spawns a process named `Child' (linked when `Link').
-spec seq_spawn(seq_world(), term(), term(), boolean()) -> ok.
seq_spawn(_World, _Parent, _Child, _Link) ->
    erlang:nif_error(not_loaded).

%% @doc `link(B)' run by `A'.
-spec seq_link(seq_world(), term(), term()) -> ok.
seq_link(_World, _A, _B) ->
    erlang:nif_error(not_loaded).

%% @doc `Name' terminates with `Reason'; its linked processes (which trap
%% exits) get `{'EXIT', Name, Reason}' messages.
-spec seq_exit(seq_world(), term(), term()) -> ok.
seq_exit(_World, _Name, _Reason) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:reset_trace()'.
-spec seq_reset(seq_world()) -> true.
seq_reset(_World) ->
    erlang:nif_error(not_loaded).

%% @doc The events made since the last call, oldest first, as the system
%% tracer gets them except that a timestamp is its kind (`timestamp',
%% `strict_monotonic_timestamp' or `monotonic_timestamp'). A spawn's
%% request and reply show as `{spawn_request, Child}' and
%% `{spawn_reply, Child}'.
-spec seq_events(seq_world()) -> [tuple()].
seq_events(_World) ->
    erlang:nif_error(not_loaded).

%% @doc Sends `Msg' to the local process `Pid' without any seq_trace token
%% information (enif_send without a message environment): the caller's
%% serial does not advance, no event is made, and receiving the message
%% leaves the receiver's token as it is. Returns `false' if `Pid' is dead.
-spec seq_send_untokened(pid(), term()) -> ok | false.
seq_send_untokened(_Pid, _Msg) ->
    erlang:nif_error(not_loaded).

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
%% Raises `badarg' for a function the model does not have. The calls run
%% in chunks of at most ?BP_CHUNK per NIF call, so that a large N neither
%% holds a dirty scheduler for long nor makes the caller unkillable.
-spec bp_call(bp_model(), mfa(), non_neg_integer()) -> ok.
bp_call(Model, MFA, N) when is_integer(N), N > ?BP_CHUNK ->
    ok = bp_call_chunk(Model, MFA, ?BP_CHUNK),
    bp_call(Model, MFA, N - ?BP_CHUNK);
bp_call(Model, MFA, N) ->
    bp_call_chunk(Model, MFA, N).

%% At most ?BP_CHUNK calls (badarg beyond).
bp_call_chunk(_Model, _MFA, _N) ->
    erlang:nif_error(not_loaded).

%%% Event limits -------------------------------------------------------------

%% @doc The decisions of tk_limit (the limits the trace file's writer
%% applies) about events at `Times': at most `Max' events (0: no maximum)
%% and at most `RateN' within any `Span' time units (`RateN' 0: no rate).
%% One of `show', `last', `stop' or `over' per time, as
%% tracekit_limits:event/2 decides (`over': after a limit was reached).
-spec limit_run(non_neg_integer(), non_neg_integer(), non_neg_integer(),
                [non_neg_integer()]) -> [show | last | stop | over].
limit_run(_Max, _RateN, _Span, _Times) ->
    erlang:nif_error(not_loaded).
