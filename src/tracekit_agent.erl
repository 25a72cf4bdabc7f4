%% @private
%% @doc The part of a cluster trace that runs on each node: a process that
%% owns the node's trace session and its ring (or trace file), and hands
%% the events to the trace's runner on the calling node when asked.
%%
%% The runner pulls: it asks for a batch, and the agent drains at most that
%% many events and sends them with the node's horizon (every event drained
%% later happened after it), so that the runner can merge the nodes by time
%% and memory stays bounded on both sides. The agent monitors the runner:
%% when the runner exits, or the connection to its node is lost, the agent
%% destroys its session and closes its ring by itself, so no node keeps
%% tracing for an origin that is gone.
%%
%% Messages from the runner: `{more, Ref, Max}' (events, or the file's
%% counters), `{close, Ref}' (stop tracing; then `more' until the agent
%% says `closed'), `{read, Ref, Offset, Size}' and `{done, Ref}' (the trace
%% file, fetched in pieces, then deleted). Each answer is
%% `{tracekit_agent, Agent, Ref, Answer}'.
-module(tracekit_agent).

-export([check/1, start/3]).

%% How far behind the drain's start the horizon is put: an event's
%% timestamp is taken by the VM a little before the tracer records it.
-define(SLACK_US, 5000).
%% How long an agent waits for the runner's next request once tracing has
%% stopped (fetching a file, pulling the last events).
-define(FETCH_MS, 60000).

%% @doc Whether this node can trace with tracekit: the tracer modules load
%% (their NIF libraries included).
-spec check(ring | file) -> ok | {error, string()}.
check(Sink) ->
    Mods = [tracekit_ring | [tracekit_file || Sink =:= file]],
    case [M || M <- Mods, not loaded(M)] of
        [] -> ok;
        [M | _] -> {error, lists:flatten(io_lib:format("~w cannot be loaded here", [M]))}
    end.

loaded(M) ->
    case code:ensure_loaded(M) of
        {module, M} -> erlang:function_exported(M, enabled, 3);
        _ -> false
    end.

%% @doc Starts the agent of `Runner' on this node (called through erpc):
%% opens the ring or file, creates the session and sets the flags of
%% `Req'. Returns when tracing is on here.
-spec start(pid(), tracekit_runner:request(), map()) ->
          {ok, pid()} | {error, term()}.
start(Runner, Req, Opts) ->
    Self = self(),
    Ref = make_ref(),
    {Pid, Mon} = spawn_monitor(fun() -> init(Self, Ref, Runner, Req, Opts) end),
    receive
        {Ref, ok} -> demonitor(Mon, [flush]), {ok, Pid};
        {Ref, {error, _} = E} -> demonitor(Mon, [flush]), E;
        {'DOWN', Mon, process, Pid, Why} -> {error, {agent_failed, Why}}
    end.

init(Starter, Ref, Runner, Req, Opts) ->
    tracekit_setup:mark_own([]),
    Mon = monitor(process, Runner),
    case open_sink(Opts) of
        {ok, Sink} ->
            ok = janitor(Sink),
            S = trace:session_create(tracekit, tracer(Sink), []),
            case tracekit_setup:session(S, Req, Opts, [self(), Runner]) of
                ok ->
                    Starter ! {Ref, ok},
                    loop(#{runner => Runner, mon => Mon, session => S, sink => Sink});
                {error, _} = E ->
                    _ = trace:session_destroy(S),
                    close_sink(Sink),
                    Starter ! {Ref, E}
            end;
        {error, _} = E ->
            Starter ! {Ref, E}
    end.

open_sink(#{node_file := Where, ring_size := Size, payload := Payload,
            max_events := Max, rate := Rate}) ->
    {Path, Temp} = case Where of
                       {temp, Name} -> {filename:join(temp_dir(), Name), true};
                       {P, kept} -> {P, false}
                   end,
    case tracekit_file:new(#{path => Path, buffer => Size, payload => Payload,
                             max_events => Max, rate => Rate}) of
        {ok, F} -> {ok, {file, F, Path, Temp}};
        {error, {file, _, Posix}} -> {error, {file, Path, Posix}};
        {error, _} = E -> E
    end;
open_sink(#{ring_size := Size, payload := Payload}) ->
    case tracekit_ring:new(#{size => Size, payload => Payload}) of
        {ok, R} -> {ok, {ring, R}};
        {error, _} = E -> E
    end.

temp_dir() ->
    case os:getenv("TMPDIR") of
        Dir when is_list(Dir), Dir =/= "" -> Dir;
        _ -> "/tmp"
    end.

tracer({ring, R}) -> {tracekit_ring, R};
tracer({file, F, _, _}) -> {tracekit_file, F}.

close_sink({ring, R}) -> ok = tracekit_ring:close(R);
close_sink({file, F, _, _}) -> ok = tracekit_file:close(F).

%% Tracing.
loop(#{runner := Runner, mon := Mon, sink := Sink} = St) ->
    receive
        {more, Ref, Max} ->
            reply(Runner, Ref, batch(Sink, Max, erlang:system_time(microsecond) - ?SLACK_US)),
            loop(St);
        {close, Ref} ->
            stop_tracing(St),
            reply(Runner, Ref, closed),
            closed(St);
        {'DOWN', Mon, process, _, _} ->
            %% The runner is gone, or its node, or the connection to it.
            stop_tracing(St),
            delete_file(Sink)
    end.

%% Tracing has stopped: the last events, or the file, until the runner is
%% done (or gone).
closed(#{runner := Runner, mon := Mon, sink := Sink} = St) ->
    receive
        {more, Ref, Max} ->
            reply(Runner, Ref, batch(Sink, Max, closed)),
            closed(St);
        {read, Ref, Offset, Size} ->
            reply(Runner, Ref, read(Sink, Offset, Size)),
            closed(St);
        {done, Ref} ->
            delete_file(Sink),
            reply(Runner, Ref, done);
        {'DOWN', Mon, process, _, _} ->
            delete_file(Sink)
    after ?FETCH_MS ->
            delete_file(Sink)
    end.

stop_tracing(#{session := S, sink := Sink}) ->
    _ = trace:session_destroy(S),
    close_sink(Sink).

reply(Runner, Ref, Answer) ->
    Runner ! {tracekit_agent, self(), Ref, Answer},
    ok.

%% Events drained now, with the horizon: a time of this node's clock
%% (microseconds of system time) that every event drained later comes
%% after; `last': they come after the last of these; `closed': there are
%% no more.
batch({ring, R}, Max, Horizon) ->
    Events = tracekit_ring:drain(R, Max),
    H = case {Horizon, Events} of
            {closed, []} -> closed;
            {closed, _} -> last;
            _ -> Horizon
        end,
    {events, Events, H, stats(R), names(Events)};
batch({file, F, _, _}, _Max, _Horizon) ->
    {file, tracekit_file:stats(F)}.

%% The registered names of this node's processes the events mention (the
%% runner shows them beside the pids, as it does for its own node).
names(Events) ->
    Pids = lists:usort([P || E <- Events, P <- lists:sublist(tuple_to_list(E), 2, 4),
                             is_pid(P), node(P) =:= node()]),
    maps:from_list([{P, N} || P <- Pids, {registered_name, N} <- [process_info(P, registered_name)]]).

stats(R) ->
    maps:with([dropped, buffered], tracekit_ring:stats(R)).

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

%% A file in the temporary directory is deleted however the agent ends
%% (killed too) by a process that waits for that end; it is tracekit's
%% own, so no trace of all processes sees it (its session is not made
%% yet). The file is deleted without a message to the file server.
janitor({file, _, Path, true}) ->
    Agent = self(),
    J = spawn(fun() ->
                      Mon = monitor(process, Agent),
                      receive
                          {'DOWN', Mon, process, Agent, _} -> _ = prim_file:delete(Path)
                      end
              end),
    tracekit_setup:mark_own([J]);
janitor(_) ->
    ok.

%% A node's file in its temporary directory is deleted once fetched (or
%% when the runner is gone); the calling node's own file is written where
%% the user asked for it, and stays.
delete_file({file, _, Path, true}) ->
    _ = file:delete(Path),
    ok;
delete_file(_) ->
    ok.
