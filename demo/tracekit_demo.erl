%% @doc The demonstration behind `make demo': starts a small system of
%% processes, traces it with tracekit and prints what was seen.
-module(tracekit_demo).

-export([main/0]).

%% @doc Runs the demonstration, printing to standard output.
-spec main() -> ok.
main() ->
    io:format("tracekit demo on OTP ~s (erts ~s), ~p schedulers~n~n",
              [erlang:system_info(otp_release), erlang:system_info(version),
               erlang:system_info(schedulers_online)]),
    count_demo(),
    ring_demo(),
    seq_demo(),
    tracekit_demo_shell:main().

%% A pool of workers answering requests, traced by a counter in its own
%% trace session.
count_demo() ->
    {ok, C} = tracekit_count:new(),
    S = trace:session_create(demo_count, {tracekit_count, C}, []),
    Workers = [spawn(fun worker/0) || _ <- lists:seq(1, 8)],
    [1 = trace:process(S, W, true, [send, 'receive', procs]) || W <- Workers],
    T0 = erlang:monotonic_time(),
    Clients = [spawn_monitor(fun() -> client(W, 10000) end) || W <- Workers],
    [receive {'DOWN', M, process, _, _} -> ok end || {_, M} <- Clients],
    Us = erlang:convert_time_unit(erlang:monotonic_time() - T0, native, microsecond),
    [W ! stop || W <- Workers],
    timer:sleep(50),
    Counts = tracekit_count:read(C),
    trace:session_destroy(S),
    ok = tracekit_count:close(C),
    io:format("8 workers served 80000 requests in ~.1f ms, traced by "
              "tracekit_count in session demo_count:~n", [Us / 1000]),
    [io:format("  ~-12s ~9w~n", [Tag, N]) || {Tag, N} <- lists:sort(maps:to_list(Counts))],
    ok.

%% The same pool, recorded by a ring: a burst far larger than the ring, and
%% what the ring kept, refused and counted.
ring_demo() ->
    {ok, R} = tracekit_ring:new(#{size => 64 * 1024}),
    S = trace:session_create(demo_ring, {tracekit_ring, R}, []),
    Workers = [spawn(fun worker/0) || _ <- lists:seq(1, 4)],
    [1 = trace:process(S, W, true, [send, 'receive', timestamp]) || W <- Workers],
    Clients = [spawn_monitor(fun() -> client(W, 20000) end) || W <- Workers],
    [receive {'DOWN', M, process, _, _} -> ok end || {_, M} <- Clients],
    trace:session_destroy(S),
    [W ! stop || W <- Workers],
    #{written := Written, dropped := Dropped, producers := Producers} = tracekit_ring:stats(R),
    Events = tracekit_ring:drain(R),
    io:format("~n4 workers served 80000 requests into a 64 KiB ring (one per scheduler "
              "thread, ~p used):~n"
              "  ~p events recorded, ~p dropped (the ring was full), "
              "~p + ~p = every event the VM offered~n"
              "  the first events drained, exactly as a process tracer would get them:~n",
              [Producers, Written, Dropped, Written, Dropped]),
    [io:format("    ~0p~n", [E]) || E <- lists:sublist(Events, 4)],
    InOrder = lists:all(fun(W) -> in_order([element(4, E) || E <- Events,
                                                           element(2, E) =:= W,
                                                           element(3, E) =:= 'receive'])
                        end, Workers),
    io:format("  each worker's events come in the order they happened: ~p~n", [InOrder]),
    tracekit_ring:close(R).

%% Requests numbered N, N-1, ...: a worker receives them in that order.
in_order(Msgs) ->
    Ns = [N || {req, _, N} <- Msgs],
    Ns =:= lists:reverse(lists:sort(Ns)).

%% One request through a gen_server, followed with seq_trace and drawn.
seq_demo() ->
    {ok, Kv} = gen_server:start(tracekit_demo_shell, #{}, []),
    {blue, Events} = tracekit_seq:follow(
                       fun() ->
                               ok = gen_server:call(Kv, {put, color, blue}),
                               gen_server:call(Kv, {get, color})
                       end),
    io:format("~n> tracekit_seq:follow(fun() -> gen_server:call(Kv, {put, color, blue}), "
              "gen_server:call(Kv, {get, color}) end)~n"
              "~p seq_trace events; tracekit_seq:diagram(Events, text):~n~ts",
              [length(Events), tracekit_seq:diagram(Events, text)]),
    gen_server:stop(Kv).

worker() ->
    receive
        {req, From, N} -> From ! {resp, N * 2}, worker();
        stop -> ok
    end.

client(_W, 0) -> ok;
client(W, N) ->
    W ! {req, self(), N},
    receive {resp, _} -> client(W, N - 1) end.
