%% @private
%% @doc The part of a trace that runs on each node traced, the calling
%% node's included: a process that owns the node's trace session and its
%% sink (a ring, a trace file, or a latency tracer) and hands the events
%% (or the histograms) to the trace when asked ({@link tracekit_proto} has the messages). This is the one place
%% where tracekit creates trace sessions.
%%
%% Setting up is ordered so that tracekit never traces itself: the sink is
%% paused while the session's process flags are set, tracekit's own
%% processes are taken out, and only then are the function patterns set
%% and the sink opened to events.
%%
%% The agent monitors the trace's process: when that process exits, or
%% its node goes, or the connection to it is lost, the agent destroys its
%% session and closes its sink by itself. A process of its own (the
%% janitor) undoes what the agent changed on the node (the system seq
%% tracer, the private directory of its trace file) however the agent
%% ends, killed too.
-module(tracekit_agent).

-export([start/2, sweep/0]).

%% How far behind the drain's start the horizon is put: an event's
%% timestamp is taken by the VM a little before the tracer records it.
-define(SLACK_US, 5000).
%% How long an agent waits for the trace's next request once tracing has
%% stopped (fetching a file, pulling the last events).
-define(FETCH_MS, 60000).
%% The prefix of the private directories of trace files in the node's
%% temporary directory.
-define(TEMP_PREFIX, "tracekit-").

%% @doc Starts the agent of the trace `Trace' on this node (called through
%% erpc, or by the trace's process for its own node) and returns when
%% tracing is on here. The calling process is left untraced.
-spec start(pid(), tracekit_proto:plan()) -> {ok, pid()} | {error, term()}.
start(Trace, Plan) ->
    Self = self(),
    Ref = make_ref(),
    {Pid, Mon} = spawn_monitor(fun() -> init(Self, Ref, Trace, Plan) end),
    receive
        {Ref, ok} -> demonitor(Mon, [flush]), {ok, Pid};
        {Ref, {error, _} = E} -> demonitor(Mon, [flush]), E;
        {'DOWN', Mon, process, Pid, Why} -> {error, {agent_failed, Why}}
    end.

init(Starter, Ref, Trace, #{sink := SinkSpec} = Plan) ->
    Janitor = janitor(self()),
    ok = tracekit_own:mark([janitor_pid(Janitor)]),
    Mon = monitor(process, Trace),
    case open_sink(SinkSpec, Janitor) of
        {ok, Sink} ->
            S = trace:session_create(tracekit, tracer(Sink), []),
            case setup(S, Sink, Plan, [self(), Starter, Trace, janitor_pid(Janitor)], Janitor) of
                ok ->
                    ok = resume(Sink),
                    Starter ! {Ref, ok},
                    loop(#{trace => Trace, mon => Mon, session => S, sink => Sink,
                           janitor => Janitor});
                {error, _} = E ->
                    stop_tracing(S, Sink, Janitor),
                    Starter ! {Ref, E}
            end;
        {error, _} = E ->
            Starter ! {Ref, E}
    end.

%%% The sink -------------------------------------------------------------------

%% A ring, a trace file or a latency tracer, paused: nothing is recorded
%% until the session is set up (tracekit's own processes taken out).
open_sink(#{kind := ring, size := Size, payload := Payload, policy := Policy}, _Janitor) ->
    case tracekit_ring:new(#{size => Size, payload => Payload, policy => Policy}) of
        {ok, R} -> ok = tracekit_ring:set(R, #{paused => true}), {ok, {ring, R}};
        {error, _} = E -> E
    end;
open_sink(#{kind := file, where := Where, size := Size, payload := Payload,
            max_events := Max, rate := Rate}, Janitor) ->
    case file_path(Where, Janitor) of
        {ok, Path, Dir} ->
            case tracekit_file:new(#{path => Path, buffer => Size, payload => Payload,
                                     max_events => Max, rate => Rate}) of
                {ok, F} ->
                    ok = tracekit_file:set(F, #{paused => true}),
                    {ok, {file, F, Path, Dir}};
                {error, {file, _, Posix}} ->
                    {error, {file, Path, Posix}};
                {error, _} = E ->
                    E
            end;
        {error, _} = E ->
            E
    end;
open_sink(#{kind := latency, options := Opts}, _Janitor) ->
    case tracekit_latency:new(Opts#{paused => true}) of
        {ok, L} -> {ok, {latency, L}};
        {error, _} = E -> E
    end.

%% The file of this node: where it was asked for, or in a private
%% directory of the node's temporary directory (deleted with the
%% directory at the end, by the janitor if need be).
file_path({path, Path}, _Janitor) ->
    {ok, Path, none};
file_path(temp, Janitor) ->
    ok = sweep(),
    Temp = temp_dir(),
    case tracekit_private:dir(Temp, ?TEMP_PREFIX ++ atom_to_list(node()) ++ "-") of
        {ok, Dir} ->
            remember(Janitor, dir, {delete_dir, Dir}),
            {ok, filename:join(Dir, "node.tkt"), Dir};
        {error, Posix} ->
            {error, {private_dir, Temp, Posix}}
    end.

temp_dir() ->
    tracekit_private:temp_dir().

tracer({ring, R}) -> {tracekit_ring, R};
tracer({file, F, _, _}) -> {tracekit_file, F};
tracer({latency, L}) -> {tracekit_latency, L}.

resume({ring, R}) -> tracekit_ring:set(R, #{paused => false});
resume({file, F, _, _}) -> tracekit_file:set(F, #{paused => false});
resume({latency, L}) -> tracekit_latency:resume(L).

close_sink({ring, R}) -> ok = tracekit_ring:close(R);
close_sink({file, F, _, _}) -> ok = tracekit_file:close(F);
close_sink({latency, L}) -> ok = tracekit_latency:close(L).

%%% The session ----------------------------------------------------------------

%% The process flags first (tracekit's own processes taken out of `all'
%% and `existing'), then the function patterns, then the seq tracer.
setup(S, Sink, #{procs := Procs, calls := Calls, seq_trace := Seq, exclude := Exclude},
      Own, Janitor) ->
    Untraced = lists:usort([P || P <- Own ++ Exclude, is_pid(P), node(P) =:= node()]
                           ++ tracekit_own:processes() ++ signal_handlers()),
    try
        lists:foreach(fun({Who, Flags}) -> flags(S, Who, Flags, Untraced) end, Procs),
        %% A module not loaded yet would have none of its functions traced.
        _ = [code:ensure_loaded(M) || {{M, _, _}, _, _} <- Calls, is_atom(M), M =/= '_'],
        _ = [trace:function(S, MFA, MS, [Scope]) || {MFA, MS, Scope} <- Calls],
        case Seq of
            true -> seq_tracer(Sink, Janitor);
            false -> ok
        end
    catch
        throw:{dead, P} ->
            {error, {bad_process, P, "the process is not alive"}}
    end.

flags(S, Who, Flags, Untraced) when Who =:= all; Who =:= existing ->
    _ = trace:process(S, Who, true, Flags),
    lists:foreach(fun(P) -> untrace(S, P) end, Untraced);
flags(S, new, Flags, _Untraced) ->
    _ = trace:process(S, new, true, Flags),
    ok;
flags(S, Pids, Flags, _Untraced) when is_list(Pids) ->
    lists:foreach(fun(P) ->
                          try trace:process(S, P, true, Flags)
                          catch error:badarg -> throw({dead, P})
                          end
                  end, Pids).

untrace(S, P) ->
    try trace:process(S, P, false, [all])
    catch error:badarg -> 0                     % exited meanwhile
    end.

%% The VM's dirty process signal handlers get a message for each signal
%% to a process that runs a dirty NIF (a drain, a terminal's writer): they
%% are never traced by all. The VM starts them first, before any other.
signal_handlers() ->
    [P || P <- lists:sublist(erlang:processes(), 16),
          erlang:process_info(P, initial_call)
              =:= {initial_call, {erts_dirty_process_signal_handler, start, 0}}].

%% The node's system seq tracer records into the sink until the agent
%% stops; the janitor puts the previous one back if the agent is killed.
seq_tracer(Sink, Janitor) ->
    Mine = tracer(Sink),
    Prev = seq_trace:set_system_tracer(Mine),
    remember(Janitor, seq, {seq_tracer, Mine, Prev}),
    ok.

%%% Tracing ---------------------------------------------------------------------

loop(#{trace := Trace, mon := Mon, sink := Sink} = St) ->
    receive
        {'DOWN', Mon, process, _, noconnection} when element(1, Sink) =:= file ->
            %% The connection to the trace is lost (its node may still
            %% run: another node's disconnection makes global disconnect
            %% the others): the file is kept a while, for the trace to
            %% fetch once it connects again.
            stop(St),
            closed(St#{mon := none});
        {'DOWN', Mon, process, _, _} ->
            %% The trace is gone, or its node, or the connection to it.
            stop(St),
            done(St);
        Msg ->
            case tracekit_proto:request(Msg) of
                {more, Ref, Max} ->
                    Horizon = erlang:system_time(microsecond) - ?SLACK_US,
                    ok = tracekit_proto:answer(Trace, Ref, batch(Sink, Max, Horizon)),
                    loop(St);
                {close, Ref} ->
                    stop(St),
                    ok = tracekit_proto:answer(Trace, Ref, {closed, counters(Sink)}),
                    closed(St);
                {done, Ref} ->
                    stop(St),
                    done(St),
                    tracekit_proto:answer(Trace, Ref, done);
                _ ->
                    loop(St)
            end
    end.

%% Tracing has stopped: the last events, or the file, until the trace is
%% done (or gone).
closed(#{trace := Trace, mon := Mon, sink := Sink} = St0) ->
    receive
        {'DOWN', Mon, process, _, _} ->
            done(St0);
        Msg ->
            %% (A trace that connected again is watched again.)
            St = case Mon of
                     none -> St0#{mon := monitor(process, Trace)};
                     _ -> St0
                 end,
            case tracekit_proto:request(Msg) of
                {more, Ref, Max} ->
                    ok = tracekit_proto:answer(Trace, Ref, batch(Sink, Max, closed)),
                    closed(St);
                {read, Ref, Offset, Size} ->
                    ok = tracekit_proto:answer(Trace, Ref, read(Sink, Offset, Size)),
                    closed(St);
                {close, Ref} ->
                    ok = tracekit_proto:answer(Trace, Ref, {closed, counters(Sink)}),
                    closed(St);
                {done, Ref} ->
                    done(St),
                    tracekit_proto:answer(Trace, Ref, done);
                no ->
                    closed(St)
            end
    after ?FETCH_MS ->
            done(St0)
    end.

stop(#{session := S, sink := Sink, janitor := J}) ->
    stop_tracing(S, Sink, J).

%% The session destroyed, the seq tracer given back, the sink closed
%% (everything recorded is then drained or written).
stop_tracing(S, Sink, Janitor) ->
    _ = trace:session_destroy(S),
    undo_now(Janitor, seq),
    close_sink(Sink).

%% The end: the janitor deletes what the agent kept.
done(#{janitor := J}) ->
    undo_now(J, dir).

%% Events drained now, with the horizon, or the file's counters. A full
%% batch may have left older events in the ring: its horizon is no later
%% than its last event (a horizon of now would let the other nodes' events
%% go out ahead of them, and a receipt ahead of its send still in this
%% ring), and `last' when that event has no timestamp (the merge then
%% keeps the horizon it had).
batch({ring, R}, Max, Horizon) ->
    Events = tracekit_ring:drain(R, Max),
    H = case {Horizon, Events} of
            {closed, []} -> closed;
            {closed, _} -> last;
            _ when length(Events) >= Max ->
                case tracekit_proto:event_stamp(lists:last(Events)) of
                    none -> last;
                    T -> min(T, Horizon)
                end;
            _ -> Horizon
        end,
    {events, Events, H, counters({ring, R}), names(Events)};
batch({file, _, _, _} = Sink, _Max, _Horizon) ->
    {file, counters(Sink)};
batch({latency, L}, _Max, Horizon) ->
    {latency, tracekit_latency:read(L), case Horizon of closed -> closed; _ -> Horizon end}.

counters({ring, R}) -> tracekit_ring:stats(R);
counters({file, F, _, _}) -> tracekit_file:stats(F);
counters({latency, L}) -> tracekit_latency:stats(L).

%% The registered names of this node's processes the events mention.
names(Events) ->
    Pids = lists:usort([P || E <- Events, P <- lists:sublist(tuple_to_list(E), 2, 4),
                             is_pid(P), node(P) =:= node()]),
    maps:from_list([{P, N} || P <- Pids, {registered_name, N} <- [process_info(P, registered_name)]]).

read({file, _, Path, _}, Offset, Size) ->
    case file:open(Path, [read, raw, binary]) of
        {ok, Fd} ->
            try file:pread(Fd, Offset, Size) of
                {ok, Bin} -> {data, Bin};
                eof -> eof;
                {error, Why} -> {error, Why}
            after
                file:close(Fd)
            end;
        {error, Why} ->
            {error, Why}
    end;
read(_, _, _) ->
    eof.

%%% The janitor ------------------------------------------------------------------

%% A process that undoes what the agent changed on the node: when asked
%% (`undo_now') or when the agent ends, however it ends. It is tracekit's
%% own, made before the session, so no trace of all processes sees it.
%% It takes requests from its agent only: they carry a reference that only
%% the agent knows, and other messages are dropped (a stranger's would
%% have it delete a directory, or crash it and leave the agent waiting).
janitor(Agent) ->
    Key = make_ref(),
    Pid = spawn(fun() ->
                        Mon = monitor(process, Agent),
                        janitor_loop(Key, Agent, Mon, #{})
                end),
    {Pid, Key}.

janitor_pid({Pid, _Key}) -> Pid.

%% What the janitor undoes if the agent ends before undo_now/2.
remember({Pid, Key}, What, Undo) ->
    Pid ! {Key, undo, What, Undo},
    ok.

%% Undoes What now, and waits until it is done.
undo_now({Pid, Key}, What) ->
    Pid ! {Key, undo_now, What},
    receive {Key, What} -> ok end.

janitor_loop(Key, Agent, Mon, Undo) ->
    receive
        {Key, undo, What, U} ->
            janitor_loop(Key, Agent, Mon, Undo#{What => U});
        {Key, undo_now, What} ->
            _ = [undo(U) || U <- [maps:get(What, Undo, none)], U =/= none],
            Agent ! {Key, What},
            janitor_loop(Key, Agent, Mon, maps:remove(What, Undo));
        {'DOWN', Mon, process, Agent, _} ->
            _ = [undo(U) || U <- maps:values(Undo)],
            ok;
        _ ->
            janitor_loop(Key, Agent, Mon, Undo)
    end.

%% The previous seq tracer is put back only while the agent's is still
%% the node's: one set since by someone else stays.
undo({seq_tracer, Mine, Prev}) ->
    case seq_trace:get_system_tracer() of
        Mine -> _ = seq_trace:set_system_tracer(Prev), ok;
        _ -> ok
    end;
undo({delete_dir, Dir}) ->
    tracekit_private:delete_dir(Dir);
undo(none) ->
    ok.

%% @doc Deletes the private directories that agents of this node left in
%% its temporary directory when the node stopped while tracing (the
%% directories of a node of the same name whose VM no longer runs).
-spec sweep() -> ok.
sweep() ->
    tracekit_private:sweep(temp_dir(), ?TEMP_PREFIX ++ atom_to_list(node()) ++ "-").
