%% Differential tests of tracekit_count on a real VM: the same workload is
%% traced at once by OTP's process tracer (in one session) and by a counter
%% (in another); the counts by tag must be identical.
-module(tracekit_count_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_testcase/2, end_per_testcase/2]).
-export([send_receive/1, calls/1, procs/1, seq_trace/1, close_stops_tracing/1,
         bad_state_is_removed/1, legacy_api/1, many_schedulers/1]).
-export([fib/1, ping/2]).

all() ->
    [send_receive, calls, procs, seq_trace, close_stops_tracing,
     bad_state_is_removed, legacy_api, many_schedulers].

init_per_testcase(_, Config) ->
    Config.

end_per_testcase(_, _Config) ->
    seq_trace:reset_trace(),
    _ = seq_trace:set_system_tracer(false),
    ok.

%% Two sessions on the same processes: a process tracer and a counter.
sessions(Name) ->
    Collector = tk_collector:start(),
    {ok, C} = tracekit_count:new(),
    Ref = trace:session_create(list_to_atom(Name ++ "_ref"), Collector, []),
    Cnt = trace:session_create(list_to_atom(Name ++ "_cnt"), {tracekit_count, C}, []),
    {Collector, C, Ref, Cnt}.

finish({Collector, C, Ref, Cnt}, Tracees) ->
    tk_collector:sync_all(Ref, Tracees),
    Expected = tk_collector:count_tags(tk_collector:events(Collector)),
    Got = tracekit_count:read(C),
    trace:session_destroy(Ref),
    trace:session_destroy(Cnt),
    tk_collector:stop(Collector),
    {Expected, Got}.

%% Spawns a process that waits for `go', then runs Fun.
paused(Fun) ->
    spawn(fun() -> receive go -> Fun() end end).

ping(Peer, 0) -> Peer ! {self(), stop}, receive done -> ok end;
ping(Peer, N) -> Peer ! {self(), N}, receive {pong, N} -> ping(Peer, N - 1) end.

pong() ->
    receive
        {From, stop} -> From ! done;
        {From, N} -> From ! {pong, N}, pong()
    end.

send_receive(_Config) ->
    S = sessions("sr"),
    {_, _, Ref, Cnt} = S,
    B = paused(fun pong/0),
    A = paused(fun() -> ping(B, 500) end),
    [begin
         trace:process(Sess, P, true, [send, 'receive'])
     end || Sess <- [Ref, Cnt], P <- [A, B]],
    B ! go, A ! go,
    tk_collector:wait_dead([A, B]),
    {Expected, Got} = finish(S, [A, B]),
    ct:log("process tracer: ~p~ncounter: ~p", [Expected, Got]),
    %% 500 pings + stop, 500 pongs + done, plus the two `go's received.
    ?assertEqual(#{send => 1002, 'receive' => 1004}, Expected),
    ?assertEqual(Expected, Got).

fib(N) when N < 2 -> N;
fib(N) -> ?MODULE:fib(N - 1) + ?MODULE:fib(N - 2).

calls(_Config) ->
    S = sessions("calls"),
    {_, _, Ref, Cnt} = S,
    W = paused(fun() -> ?MODULE:fib(12), lists:seq(1, 3) end),
    MS = [{'_', [], [{return_trace}, {exception_trace}]}],
    [begin
         1 = trace:function(Sess, {?MODULE, fib, 1}, MS, [local]),
         1 = trace:function(Sess, {lists, seq, 2}, true, [global]),
         1 = trace:process(Sess, W, true, [call])
     end || Sess <- [Ref, Cnt]],
    W ! go,
    tk_collector:wait_dead([W]),
    {Expected, Got} = finish(S, [W]),
    ct:log("process tracer: ~p~ncounter: ~p", [Expected, Got]),
    %% fib(12) makes 465 calls, each returning; plus lists:seq/2.
    ?assertEqual(#{call => 466, return_from => 465}, Expected),
    ?assertEqual(Expected, Got).

procs(_Config) ->
    S = sessions("procs"),
    {_, _, Ref, Cnt} = S,
    W = paused(fun() ->
                       process_flag(trap_exit, true),
                       register(tk_count_procs, self()),
                       Kids = [spawn_link(fun() -> receive stop -> ok end end)
                               || _ <- lists:seq(1, 5)],
                       [unlink(K) || K <- lists:sublist(Kids, 2)],
                       [K ! stop || K <- Kids],
                       [receive {'EXIT', K, _} -> ok end || K <- lists:nthtail(2, Kids)],
                       unregister(tk_count_procs)
               end),
    [1 = trace:process(Sess, W, true, [procs]) || Sess <- [Ref, Cnt]],
    W ! go,
    tk_collector:wait_dead([W]),
    {Expected, Got} = finish(S, [W]),
    ct:log("process tracer: ~p~ncounter: ~p", [Expected, Got]),
    ?assertMatch(#{spawn := 5, link := 5, unlink := 2, register := 1,
                   unregister := 1, exit := 1}, Expected),
    ?assertEqual(Expected, Got).

%% seq_trace has one system tracer per node, so the workload runs twice:
%% once into a collector, once into a counter.
seq_trace(_Config) ->
    Collector = tk_collector:start(),
    false = seq_trace:set_system_tracer(Collector),
    seq_workload(),
    Expected = wait_count(Collector, 10),
    {ok, C} = tracekit_count:new(),
    Collector = seq_trace:set_system_tracer({tracekit_count, C}),
    seq_workload(),
    Got = tracekit_count:read(C),
    {tracekit_count, C} = seq_trace:set_system_tracer(false),
    ct:log("process tracer: ~p~ncounter: ~p", [Expected, Got]),
    ?assertEqual(#{seq_trace => 10}, Expected),
    ?assertEqual(Expected, Got).

%% Four messages, each sent and received under a token (8 events), and two
%% prints whose label matches (a print with another label is not traced).
seq_workload() ->
    Self = self(),
    Echo = spawn(fun() -> receive {P, X} -> P ! {echo, X} end,
                          receive {P2, Y} -> P2 ! {echo, Y} end end),
    seq_trace:set_token(label, 7),
    seq_trace:set_token(send, true),
    seq_trace:set_token('receive', true),
    seq_trace:set_token(print, true),
    Echo ! {Self, 1},
    receive {echo, 1} -> ok end,
    seq_trace:print(7, first),
    seq_trace:print(8, not_matching_label),
    seq_trace:print(second),
    Echo ! {Self, 2},
    seq_trace:set_token([]),
    receive {echo, 2} -> ok end,
    %% The reply carried the token back in: clear it again so that the
    %% test's own messages are not traced.
    seq_trace:set_token([]),
    ok.

wait_count(Collector, N) ->
    wait_count(Collector, N, 50).
wait_count(Collector, _N, 0) ->
    tk_collector:count_tags(tk_collector:events(Collector));
wait_count(Collector, N, Tries) ->
    Es = tk_collector:events(Collector),
    case length(Es) >= N of
        true -> tk_collector:count_tags(Es);
        false -> timer:sleep(20), wait_count(Collector, N, Tries - 1)
    end.

close_stops_tracing(_Config) ->
    {ok, C} = tracekit_count:new(),
    S = trace:session_create(close, {tracekit_count, C}, []),
    Loop = fun L() -> receive {tick, From} -> From ! tock, L() end end,
    W = spawn(Loop),
    1 = trace:process(S, W, true, ['receive']),
    [begin W ! {tick, self()}, receive tock -> ok end end || _ <- lists:seq(1, 10)],
    ?assertEqual(#{'receive' => 10}, tracekit_count:read(C)),
    ?assertEqual({flags, ['receive']}, trace:info(S, W, flags)),
    ok = tracekit_count:close(C),
    ?assertEqual(remove, tracekit_count:enabled(trace_status, C, W)),
    ?assertEqual(discard, tracekit_count:enabled('receive', C, W)),
    [begin W ! {tick, self()}, receive tock -> ok end end || _ <- lists:seq(1, 10)],
    %% Nothing more was counted, and the VM has dropped the tracer from the
    %% process (trace:info asks trace_status, which answers remove).
    ?assertEqual(#{'receive' => 10}, tracekit_count:read(C)),
    ?assertEqual({flags, []}, trace:info(S, W, flags)),
    ok = tracekit_count:reset(C),
    ?assertEqual(#{}, tracekit_count:read(C)),
    trace:session_destroy(S),
    exit(W, kill).

%% A state that is not a counter: the VM survives and the tracer removes
%% itself; direct calls with bad arguments raise badarg.
bad_state_is_removed(_Config) ->
    W = spawn(fun() -> receive stop -> ok end end),
    S = trace:session_create(bad, {tracekit_count, not_a_counter}, []),
    _ = trace:process(S, W, true, [send, 'receive']),
    W ! hello,
    ?assertEqual({flags, []}, trace:info(S, W, flags)),
    ?assertEqual(remove, tracekit_count:enabled(trace_status, make_ref(), W)),
    ?assertEqual(discard, tracekit_count:enabled(send, <<>>, W)),
    ?assertEqual(ok, tracekit_count:trace(send, foo, W, hi, #{})),
    [?assertError(badarg, tracekit_count:F(X))
     || F <- [read, reset, close], X <- [foo, make_ref(), self(), <<>>]],
    trace:session_destroy(S),
    W ! stop.

%% The legacy API: erlang:trace/3 with {tracer, Module, State}.
legacy_api(_Config) ->
    {ok, C} = tracekit_count:new(),
    W = spawn(fun() -> receive go -> [self() ! x || _ <- lists:seq(1, 3)],
                                     receive stop -> ok end end end),
    1 = erlang:trace(W, true, [send, {tracer, tracekit_count, C}]),
    W ! go,
    W ! stop,
    tk_collector:wait_dead([W]),
    ?assertEqual(#{send => 3}, tracekit_count:read(C)).

%% Many processes on every scheduler count into per-thread rows; the total
%% is exact.
many_schedulers(_Config) ->
    {ok, C} = tracekit_count:new(),
    S = trace:session_create(many, {tracekit_count, C}, []),
    N = 200, Msgs = 500,
    Ws = [paused(fun() -> [self() ! m || _ <- lists:seq(1, Msgs)] end)
          || _ <- lists:seq(1, N)],
    [1 = trace:process(S, W, true, [send]) || W <- Ws],
    [W ! go || W <- Ws],
    tk_collector:wait_dead(Ws),
    ?assertEqual(#{send => N * Msgs}, tracekit_count:read(C)),
    trace:session_destroy(S).
