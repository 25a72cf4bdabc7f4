%% Differential tests of tracekit_ring and tracekit_file against the VM:
%% every workload runs once, traced at the same time by OTP's process
%% tracer (one session) and by a ring, or a trace file read back (another
%% session), with the same flags. The events drained or read must equal the
%% process tracer's messages, tracee by tracee and in order; timestamps
%% (made separately by each tracer) must have the same shape. Each group
%% adds one of the optional fields to every workload.
%%
%% GC tracing of one process in two sessions crashes OTP 27-29, and there
%% is one seq_trace system tracer per node: those workloads run twice
%% instead, once per tracer, from the same starting state.
-module(tracekit_ring_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, groups/0, init_per_group/2, end_per_group/2,
         init_per_testcase/2, end_per_testcase/2]).
-export([messages/1, calls/1, procs/1, running/1, ports/1, gc/1,
         seq_trace/1]).
-export([work/1, fail/1, deep/1]).

-define(VARIANTS, [plain, timestamp, monotonic_timestamp,
                   strict_monotonic_timestamp, cpu_timestamp, scheduler_id]).

all() ->
    [{group, ring}, {group, file}].

groups() ->
    Cases = [messages, calls, procs, running, ports, gc, seq_trace],
    [{Sink, [], [{group, V} || V <- ?VARIANTS]} || Sink <- [ring, file]]
        ++ [{V, [], Cases} || V <- ?VARIANTS].

init_per_group(Sink, Config) when Sink =:= ring; Sink =:= file ->
    [{sink, Sink} | Config];
init_per_group(plain, Config) ->
    [{flags, []} | Config];
init_per_group(cpu_timestamp, Config) ->
    %% A node-global flag, accepted only for all processes; with it the
    %% `timestamp' flag asks the tracer for CPU time.
    _ = erlang:trace(all, true, [cpu_timestamp]),
    [{flags, [timestamp]} | Config];
init_per_group(Flag, Config) ->
    [{flags, [Flag]} | Config].

end_per_group(cpu_timestamp, _) ->
    _ = erlang:trace(all, false, [cpu_timestamp]),
    ok;
end_per_group(_, _) ->
    ok.

init_per_testcase(_, Config) ->
    put(tk_sink, {?config(sink, Config), ?config(priv_dir, Config)}),
    Config.

end_per_testcase(_, _) ->
    seq_trace:reset_trace(),
    _ = seq_trace:set_system_tracer(false),
    ok.

%%% Running both tracers --------------------------------------------------

%% The tracer under test: a ring, or a trace file in the case's directory.
new_sink() ->
    case get(tk_sink) of
        {ring, _} ->
            {ok, R} = tracekit_ring:new(#{}),
            {tracekit_ring, R};
        {file, Dir} ->
            Path = filename:join(Dir, "trace." ++ integer_to_list(erlang:unique_integer([positive]))),
            {ok, F} = tracekit_file:new(#{path => Path}),
            {tracekit_file, F}
    end.

%% Everything it recorded, with nothing dropped.
take({tracekit_ring, R}) ->
    Evs = tracekit_ring:drain(R),
    ?assertMatch(#{dropped := 0}, tracekit_ring:stats(R)),
    Evs;
take({tracekit_file, F}) ->
    ok = tracekit_file:close(F),
    #{dropped := 0, buffered := 0, written := N, path := Path} = tracekit_file:stats(F),
    {ok, Evs} = tracekit_file:read(Path),
    ?assertEqual(N, length(Evs)),
    Evs.

%% Spawns a process that waits for `go', then runs Fun.
paused(Fun) ->
    spawn(fun() -> receive go -> Fun() end end).

%% Traces Tracees in two sessions (process tracer, ring) with Setup(S),
%% starts them, waits for Done, and returns both event lists.
both(Setup, _Tracees, Start, Done) ->
    Collector = tk_collector:start(),
    Sink = new_sink(),
    Ref = trace:session_create(diff_ref, Collector, []),
    Rng = trace:session_create(diff_ring, Sink, []),
    Setup(Ref),
    Setup(Rng),
    Start(),
    Done(),
    %% Every trace message of the session, ports' included, delivered.
    ok = tk_collector:sync(Ref, all),
    Expected = tk_collector:events(Collector),
    trace:session_destroy(Ref),
    trace:session_destroy(Rng),
    tk_collector:stop(Collector),
    {Expected, take(Sink)}.

%% Per tracee, in order, with timestamps checked and replaced by their kind.
compare(Flags, Expected, Got, Tracees) ->
    E = by_tracee(norm(Flags, Expected), Tracees),
    G = by_tracee(norm(Flags, Got), Tracees),
    ct:log("flags ~p~nprocess tracer:~n~p~nring:~n~p", [Flags, E, G]),
    [?assertEqual({T, EvE}, {T, EvG}) || {{T, EvE}, {T, EvG}} <- lists:zip(E, G)],
    ?assertEqual(E, G),
    lists:sum([length(Es) || {_, Es} <- E]).

by_tracee(Events, Tracees) ->
    [{T, [Ev || Ev <- Events, tracee(Ev) =:= T]} || T <- Tracees].

tracee(Ev) -> element(2, Ev).

norm(Flags, Events) ->
    Kind = ts_kind(Flags),
    [norm_ev(Kind, Ev) || Ev <- Events].

ts_kind(Flags) ->
    case [F || F <- Flags, lists:member(F, [timestamp, monotonic_timestamp,
                                             strict_monotonic_timestamp,
                                             cpu_timestamp])] of
        [] -> none;
        [F] -> F
    end.

norm_ev(none, Ev) ->
    ?assertNotEqual(trace_ts, element(1, Ev)),
    Ev;
norm_ev(Kind, Ev) ->
    Last = tuple_size(Ev),
    Ts = element(Last, Ev),
    case element(1, Ev) of
        trace_ts -> ok;
        seq_trace -> ok
    end,
    ?assert(ts_shape(Kind, Ts)),
    setelement(Last, Ev, {ts, Kind}).

ts_shape(K, {A, B, C}) when K =:= timestamp; K =:= cpu_timestamp ->
    is_integer(A) andalso is_integer(B) andalso is_integer(C);
ts_shape(monotonic_timestamp, T) -> is_integer(T);
ts_shape(strict_monotonic_timestamp, {M, U}) -> is_integer(M) andalso is_integer(U);
ts_shape(_, _) -> false.

flags(Config, Fs) ->
    Fs ++ ?config(flags, Config).

%%% Workloads --------------------------------------------------------------

%% send, 'receive', send_to_non_existing_process.
messages(Config) ->
    Flags = flags(Config, [send, 'receive']),
    Dead = spawn(fun() -> ok end),
    tk_collector:wait_dead([Dead]),
    Echo = paused(fun Loop() ->
                          receive
                              {From, stop} -> From ! stopped;
                              {From, M} -> From ! {echo, M}, Loop()
                          end
                  end),
    Client = paused(fun() ->
                            Terms = [x, 1, 2.5, "str", <<"bin">>, {t, [1 | 2]},
                                     #{k => v}, make_ref(), self(),
                                     lists:seq(1, 50)],
                            [begin Echo ! {self(), T}, receive {echo, T} -> ok end end
                             || T <- Terms],
                            Dead ! lost,
                            Echo ! {self(), stop},
                            receive stopped -> ok end
                    end),
    Tracees = [Echo, Client],
    {E, G} = both(fun(S) -> [1 = trace:process(S, P, true, Flags) || P <- Tracees] end,
                  Tracees,
                  fun() -> Echo ! go, Client ! go end,
                  fun() -> tk_collector:wait_dead(Tracees) end),
    N = compare(Flags, E, G, Tracees),
    ?assert(lists:any(fun(Ev) -> element(3, Ev) =:= send_to_non_existing_process end, E)),
    ?assert(N >= 44).

work(N) when N =< 0 -> fail(N);
work(N) -> {ok, N + deep(N)}.

fail(N) -> erlang:error({bad, N}).

deep(0) -> 0;
deep(N) -> 1 + ?MODULE:deep(N - 1).

%% call, return_from, exception_from, return_to, match-spec {message, X}.
calls(Config) ->
    Flags = flags(Config, [call, return_to]),
    W = paused(fun() ->
                       [try ?MODULE:work(I) catch error:_ -> failed end || I <- [3, 0, 2]],
                       lists:reverse([a, b])
               end),
    MS = [{['$1'], [], [{return_trace}, {exception_trace}, {message, {{arg, '$1'}}}]}],
    {E, G} = both(fun(S) ->
                          1 = trace:process(S, W, true, Flags),
                          1 = trace:function(S, {?MODULE, work, 1}, MS, [local]),
                          1 = trace:function(S, {?MODULE, fail, 1}, true, [local]),
                          1 = trace:function(S, {?MODULE, deep, 1}, [{'_', [], [{return_trace}]}], [local]),
                          1 = trace:function(S, {lists, reverse, 1}, [{'_', [], [{message, false}]}], [global]),
                          1 = trace:function(S, {lists, reverse, 2}, true, [global])
                  end,
                  [W], fun() -> W ! go end, fun() -> tk_collector:wait_dead([W]) end),
    N = compare(Flags, E, G, [W]),
    Tags = lists:usort([element(3, Ev) || Ev <- E]),
    ?assertEqual([call, exception_from, return_from, return_to], Tags),
    %% {message, {arg, X}} shows as the match-spec result after the term.
    ?assert(lists:any(fun(Ev) -> element(5, Ev) =:= {arg, 3} end, E)),
    ?assert(N > 20).

%% spawn, spawned, exit, link, unlink, getting_linked, getting_unlinked,
%% register, unregister.
procs(Config) ->
    Flags = flags(Config, [procs, set_on_spawn]),
    Friend = paused(fun() -> receive stop -> ok end end),
    W = paused(fun() ->
                       process_flag(trap_exit, true),
                       register(tk_ring_procs_w, self()),
                       link(Friend),
                       unlink(Friend),
                       Kid = spawn_link(?MODULE, deep, [3]),
                       receive {'EXIT', Kid, _} -> ok end,
                       K2 = spawn(fun() -> receive stop -> exit(bye) end end),
                       link(K2),
                       K2 ! stop,
                       receive {'EXIT', K2, bye} -> ok end,
                       unregister(tk_ring_procs_w),
                       Friend ! stop
               end),
    {E, G} = both(fun(S) ->
                          1 = trace:process(S, W, true, Flags),
                          1 = trace:process(S, Friend, true, Flags)
                  end,
                  [W, Friend], fun() -> Friend ! go, W ! go end,
                  fun() -> tk_collector:wait_dead([W, Friend]) end),
    Kids = lists:usort([element(4, Ev) || Ev <- E, element(3, Ev) =:= spawn]),
    N = compare(Flags, E, G, [W, Friend | Kids]),
    Tags = lists:usort([element(3, Ev) || Ev <- E]),
    ?assertEqual([exit, getting_linked, getting_unlinked, link, register, spawn,
                  spawned, unlink, unregister], Tags),
    ?assert(N > 15).

%% in, out, in_exiting, out_exiting, out_exited.
running(Config) ->
    Flags = flags(Config, [running, exiting]),
    %% A process that owns a big ETS table yields while exiting (the table
    %% is freed in steps): that gives in_exiting/out_exiting.
    W = paused(fun() ->
                       [receive after 1 -> ok end || _ <- lists:seq(1, 3)],
                       T = ets:new(t, []),
                       ets:insert(T, [{I, I} || I <- lists:seq(1, 200000)]),
                       exit(done)
               end),
    {E, G} = both(fun(S) -> 1 = trace:process(S, W, true, Flags) end,
                  [W], fun() -> W ! go end, fun() -> tk_collector:wait_dead([W]) end),
    N = compare(Flags, E, G, [W]),
    Tags = lists:usort([element(3, Ev) || Ev <- E]),
    ?assertEqual([in, in_exiting, out, out_exited, out_exiting], Tags),
    ?assert(N >= 12).

%% Port events: open, closed, link/getting_linked, register, send and
%% receive of ports, in/out of ports.
ports(Config) ->
    PFlags = flags(Config, [ports, send, 'receive', running_ports]),
    Self = self(),
    Owner = paused(fun() ->
                           P = open_port({spawn, "cat"}, [binary]),
                           Self ! {port, P},
                           true = port_command(P, <<"hello">>),
                           receive {P, {data, _}} -> ok end,
                           register(tk_ring_port, P),
                           unregister(tk_ring_port),
                           port_close(P)
                   end),
    {E, G} = both(fun(S) -> _ = trace:port(S, new, true, PFlags) end,
                  [Owner],
                  fun() -> Owner ! go end,
                  fun() -> tk_collector:wait_dead([Owner]) end),
    Port = receive {port, P} -> P after 5000 -> error(no_port) end,
    N = compare(PFlags, E, G, [Port]),
    Tags = lists:usort([element(3, Ev) || Ev <- E, element(2, Ev) =:= Port]),
    ?assertEqual([closed, getting_linked, in, open, out, 'receive', register,
                  send, unregister], Tags),
    ?assert(N >= 12).

%% gc_minor_start/end, gc_major_start/end: one session per run (two
%% sessions tracing GC of one process crash the VM), the same workload in a
%% fresh process each time, which the VM collects identically.
gc(Config) ->
    Flags = flags(Config, [garbage_collection]),
    Run = fun(Tracer) ->
                  S = trace:session_create(diff_gc, Tracer, []),
                  W = paused(fun() ->
                                     _ = lists:foldl(fun(I, A) -> [I | A] end, [],
                                                     lists:seq(1, 5000)),
                                     garbage_collect()
                             end),
                  1 = trace:process(S, W, true, Flags),
                  W ! go,
                  tk_collector:wait_dead([W]),
                  {S, W}
          end,
    Collector = tk_collector:start(),
    {S1, W1} = Run(Collector),
    tk_collector:sync(S1, W1),
    E = tk_collector:events(Collector),
    trace:session_destroy(S1),
    Sink = new_sink(),
    {S2, W2} = Run(Sink),
    trace:session_destroy(S2),
    G = take(Sink),
    %% Two runs can differ in the sizes the VM reports (what the mailbox
    %% held, when collections struck), so compare the events' shape: the
    %% same tags in the same order, each with the same info keys, and
    %% integer values.
    Sched = lists:member(scheduler_id, Flags),
    Shape = fun(Evs, W) ->
                    [sched_shape(Sched, setelement(4, setelement(2, Ev, worker),
                                                   info_shape(element(4, Ev))))
                     || Ev <- Evs, element(2, Ev) =:= W]
            end,
    N = compare(Flags, Shape(E, W1), Shape(G, W2), [worker]),
    Tags = lists:usort([element(3, Ev) || Ev <- E]),
    ?assertEqual([gc_major_end, gc_major_start, gc_minor_end, gc_minor_start], Tags),
    ?assert(N >= 4).

%% The runs may be on different schedulers.
sched_shape(false, Ev) -> Ev;
sched_shape(true, Ev) ->
    ?assert(is_integer(element(5, Ev))),
    setelement(5, Ev, scheduler).

info_shape(Info) ->
    [{K, integer} || {K, V} <- Info, is_atom(K), is_integer(V)].

%% seq_trace send, receive and print, with exit signals: the same flow run
%% twice by the same processes, each time from reset serials.
seq_trace(Config) ->
    TsFlag = case ts_kind(?config(flags, Config)) of
                 none -> [];
                 timestamp -> [timestamp];
                 cpu_timestamp -> [timestamp]; % seq_trace has no cpu flag
                 monotonic_timestamp -> [monotonic_timestamp];
                 strict_monotonic_timestamp -> [strict_monotonic_timestamp]
             end,
    Self = self(),
    Server = spawn(fun Loop() ->
                           receive
                               {req, From, X} -> From ! {reply, X}, Loop();
                               {die, From} -> exit(From, {bye, self()}), Loop()
                           end
                   end),
    Flow = fun() ->
                   seq_trace:set_token(label, 42),
                   [seq_trace:set_token(F, true) || F <- [send, 'receive', print | TsFlag]],
                   Server ! {req, Self, 1},
                   receive {reply, 1} -> ok end,
                   seq_trace:print(42, {checkpoint, 1}),
                   Helper = spawn(fun() -> process_flag(trap_exit, true),
                                           receive {'EXIT', _, _} -> ok end end),
                   Server ! {die, Helper},
                   seq_trace:set_token([]),
                   tk_collector:wait_dead([Helper]),
                   seq_trace:set_token([])
           end,
    Collector = tk_collector:start(),
    seq_trace:reset_trace(),
    false = seq_trace:set_system_tracer(Collector),
    Flow(),
    E = wait_events(Collector, 7),
    Sink = new_sink(),
    seq_trace:reset_trace(),
    Collector = seq_trace:set_system_tracer(Sink),
    Flow(),
    Sink = seq_trace:set_system_tracer(false),
    G0 = take(Sink),
    %% A process tracer gets the send and the receive of a message from two
    %% processes, so in either order: compare both sides by serial (then
    %% kind), and check separately that the ring has each receive after its
    %% send. Helpers differ between the runs: name them by order of
    %% appearance, after sorting.
    BySerial = fun(Evs) -> lists:sort(fun(A, B) -> seq_key(A) =< seq_key(B) end, Evs) end,
    Norm = fun(Evs) -> rename_pids(BySerial(Evs), [Self, Server]) end,
    [?assert(seq_pos(send, Serial, G0) < seq_pos('receive', Serial, G0))
     || Ev <- G0, {'receive', Serial, _, _, _} <- [element(3, Ev)]],
    Flags = case TsFlag of [] -> []; [timestamp] -> [timestamp]; [F] -> [F] end,
    N = compare(Flags, Norm(E), Norm(G0), [42]),
    ?assertEqual(lists:usort([send, 'receive', print]),
                 lists:usort([element(1, element(3, Ev)) || Ev <- E])),
    ?assert(N >= 7),
    exit(Server, kill).

seq_key(Ev) ->
    Info = element(3, Ev),
    {element(2, Info), case element(1, Info) of send -> 0; 'receive' -> 1; print -> 2 end}.

seq_pos(Kind, Serial, Evs) ->
    length(lists:takewhile(fun(Ev) -> {element(1, element(3, Ev)), element(2, element(3, Ev))}
                                          =/= {Kind, Serial} end, Evs)).

wait_events(Collector, N) ->
    wait_events(Collector, N, 100).
wait_events(Collector, _N, 0) ->
    tk_collector:events(Collector);
wait_events(Collector, N, Tries) ->
    case tk_collector:events(Collector) of
        Es when length(Es) >= N -> timer:sleep(20), tk_collector:events(Collector);
        _ -> timer:sleep(10), wait_events(Collector, N, Tries - 1)
    end.

%% Replaces pids other than Known with {pid, I}, and references with
%% {ref, I}, by order of appearance.
rename_pids(Events, Known) ->
    {Out, _} = lists:mapfoldl(fun(Ev, Map) -> rename(Ev, Map, Known) end, #{}, Events),
    Out.

rename(P, Map, Known) when is_pid(P) ->
    case lists:member(P, Known) of
        true -> {P, Map};
        false ->
            case Map of
                #{P := I} -> {{pid, I}, Map};
                _ -> I = map_size(Map), {{pid, I}, Map#{P => I}}
            end
    end;
rename(R, Map, _Known) when is_reference(R) ->
    case Map of
        #{R := I} -> {{ref, I}, Map};
        _ -> I = map_size(Map), {{ref, I}, Map#{R => I}}
    end;
rename(T, Map, Known) when is_tuple(T) ->
    {L, Map1} = rename(tuple_to_list(T), Map, Known),
    {list_to_tuple(L), Map1};
rename([H | T], Map, Known) ->
    {H1, Map1} = rename(H, Map, Known),
    {T1, Map2} = rename(T, Map1, Known),
    {[H1 | T1], Map2};
rename(X, Map, _) ->
    {X, Map}.
