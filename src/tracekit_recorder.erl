%% @doc A flight recorder: traces into an `overwrite' ring in a session of
%% its own and, when stopped, hands back the last N events. Used by
%% {@link tracekit_cth} for each test case.
%%
%% A process of its own owns the session and the ring, so the recording
%% survives the death of the process that started it (a test case killed
%% by its timetrap) until {@link stop/1}.
-module(tracekit_recorder).

-export([start/1, stop/1]).

-export_type([recorder/0, spec/0, result/0]).

-opaque recorder() :: pid().
%% `calls': resolved call specs, traced in every process; `processes':
%% whose messages (`messages') and process events (`procs') to trace;
%% `seq_trace': record seq_trace events (this sets the node's system seq
%% tracer while recording, and restores the previous one after);
%% `events': how many of the last events to keep; `ring_size': bytes per
%% producer thread; `marks': functions whose calls, returns and exceptions
%% are recorded in the `mark_process', with its process events (to find
%% where a test case body begins and ends, also when it is killed).
-type spec() :: #{calls := [{tracekit_spec:call(), [tracekit_spec:mfa_pattern()]}],
                  processes := [pid()],
                  messages := boolean(),
                  procs := boolean(),
                  seq_trace := boolean(),
                  events := pos_integer(),
                  ring_size := pos_integer(),
                  marks => [mfa()],
                  mark_process => pid()}.
%% `events': the events kept, oldest first; `lost': events that were
%% recorded but gave way to newer ones, or were refused.
-type result() :: #{events := [tuple()], lost := non_neg_integer()}.

%% @doc Starts recording; returns when tracing is on.
-spec start(spec()) -> {ok, recorder()} | {error, term()}.
start(Spec) ->
    Self = self(),
    Ref = make_ref(),
    {Pid, Mon} = spawn_monitor(fun() -> init(Self, Ref, Spec) end),
    receive
        {Ref, ok} -> demonitor(Mon, [flush]), {ok, Pid};
        {Ref, {error, _} = E} -> demonitor(Mon, [flush]), E;
        {'DOWN', Mon, process, Pid, Why} -> {error, {recorder_failed, Why}}
    end.

%% @doc Stops recording, cleans up (session destroyed, ring closed, the
%% seq tracer restored) and returns what was recorded.
-spec stop(recorder()) -> {ok, result()} | {error, not_running}.
stop(Pid) ->
    Mon = monitor(process, Pid),
    Pid ! {stop, self(), Mon},
    receive
        {Mon, Result} -> demonitor(Mon, [flush]), {ok, Result};
        {'DOWN', Mon, process, Pid, _} -> {error, not_running}
    end.

init(Parent, Ref, #{ring_size := Size} = Spec) ->
    {ok, Ring} = tracekit_ring:new(#{size => Size, policy => overwrite}),
    Session = trace:session_create(tracekit_cth, {tracekit_ring, Ring}, []),
    try
        setup(Session, Ring, Spec)
    of
        Prev ->
            Parent ! {Ref, ok},
            wait(Session, Ring, Prev, Spec)
    catch
        Class:Why ->
            _ = trace:session_destroy(Session),
            ok = tracekit_ring:close(Ring),
            Parent ! {Ref, {error, {Class, Why}}}
    end.

setup(S, Ring, #{calls := Calls, processes := Procs, messages := M,
                 procs := P, seq_trace := Seq} = Spec) ->
    _ = [trace:function(S, MFA, MS, [local])
         || {#{match_spec := MS}, MFAs} <- Calls, MFA <- MFAs],
    Marks = maps:get(marks, Spec, []),
    _ = [trace:function(S, MFA, [{'_', [], [{exception_trace}]}], [local])
         || MFA <- Marks],
    _ = [try trace:process(S, MP, true, [call, procs, timestamp])
         catch error:badarg -> 0
         end || Marks =/= [], MP <- [maps:get(mark_process, Spec)]],
    _ = [{trace:process(S, all, true, [call, timestamp]),
          trace:process(S, self(), false, [all])} || Calls =/= []],
    Flags = [send || M] ++ ['receive' || M] ++ [procs || P],
    _ = [try trace:process(S, Pid, true, [timestamp | Flags])
         catch error:badarg -> 0      % exited already: nothing to record
         end || Flags =/= [], Pid <- Procs],
    case Seq of
        true -> {seq, seq_trace:set_system_tracer({tracekit_ring, Ring})};
        false -> none
    end.

wait(Session, Ring, Prev, #{events := N}) ->
    receive
        {stop, From, Tag} ->
            _ = trace:session_destroy(Session),
            _ = case Prev of
                    {seq, Old} -> seq_trace:set_system_tracer(Old);
                    none -> ok
                end,
            ok = tracekit_ring:close(Ring),
            Events = tracekit_ring:drain(Ring),
            #{overwritten := Over, dropped := Dropped} = tracekit_ring:stats(Ring),
            Len = length(Events),
            Kept = lists:nthtail(max(0, Len - N), Events),
            From ! {Tag, #{events => Kept,
                           lost => Over + Dropped + (Len - length(Kept))}}
    end.
