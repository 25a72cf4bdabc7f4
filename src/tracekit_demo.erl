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

worker() ->
    receive
        {req, From, N} -> From ! {resp, N * 2}, worker();
        stop -> ok
    end.

client(_W, 0) -> ok;
client(W, N) ->
    W ! {req, self(), N},
    receive {resp, _} -> client(W, N - 1) end.
