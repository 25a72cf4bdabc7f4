%% @doc The part of `make demo' that shows tracing at the shell
%% ({@link tracekit}): a small key-value server is traced by call specs and
%% by its messages, then a burst of a million calls shows the limits, and
%% the latency of the server's calls is measured under load, and its
%% slowest calls are kept whole.
%% Each step prints the shell command it stands for, then what tracekit
%% printed.
-module(tracekit_demo_shell).

-behaviour(gen_server).

-export([main/0]).
%% The traced server and function.
-export([init/1, handle_call/3, handle_cast/2, tick/1, lookup/1]).

%% @doc Runs this part of the demonstration, printing to standard output.
-spec main() -> ok.
main() ->
    {ok, Kv} = gen_server:start({local, demo_kv}, ?MODULE, #{}, []),
    ok = gen_server:call(demo_kv, {put, color, blue}),

    shell("tracekit:calls(\"tracekit_demo_shell:handle_call({get, _}, _, _) -> return\")."),
    {ok, _} = result(tracekit:calls("tracekit_demo_shell:handle_call({get, _}, _, _) -> return")),
    blue = gen_server:call(demo_kv, {get, color}),
    undefined = gen_server:call(demo_kv, {get, size}),
    ok = gen_server:call(demo_kv, {put, size, 10}),
    timer:sleep(100),
    shell("tracekit:stop()."),
    ok = result(tracekit:stop()),

    shell("tracekit:messages(demo_kv, #{max_events => 4})."),
    {ok, T2} = result(tracekit:messages(demo_kv, #{max_events => 4})),
    ok = gen_server:call(demo_kv, {put, shape, round}),
    round = gen_server:call(demo_kv, {get, shape}),
    _ = gen_server:call(demo_kv, {get, color}),
    wait(T2),

    shell("tracekit:calls(\"tracekit_demo_shell:tick/1\", #{max_events => 5}), "
          "[tracekit_demo_shell:tick(I) || I <- lists:seq(1, 1000000)]."),
    {ok, T3} = result(tracekit:calls("tracekit_demo_shell:tick/1", #{max_events => 5})),
    ticks(1, 1000000),
    wait(T3),

    %% Clients asking for keys, one of them slow to look up.
    Clients = [spawn(fun() -> client(Key) end) || Key <- [color, size, archive, color]],
    shell("tracekit:latency([\"tracekit_demo_shell:handle_call/3\", \"tracekit_demo_shell:lookup/1\"], "
          "#{max_time => 2500})."),
    {ok, T4} = result(tracekit:latency(["tracekit_demo_shell:handle_call/3",
                                        "tracekit_demo_shell:lookup/1"], #{max_time => 2500})),
    wait(T4),
    %% The whole story of the slowest of those calls.
    shell("tracekit:slow(\"tracekit_demo_shell:handle_call/3\", "
          "#{over => {5, ms}, max_captures => 2, processes => [demo_kv]})."),
    {ok, T5} = result(tracekit:slow("tracekit_demo_shell:handle_call/3",
                                    #{over => {5, ms}, max_captures => 2,
                                      processes => [demo_kv]})),
    wait(T5),
    [exit(C, kill) || C <- Clients],

    shell("tracekit:calls(\"tracekit_demo_shell:handle_call({get, K}) when K > 1\")."),
    {error, _} = result(tracekit:calls("tracekit_demo_shell:handle_call({get, K}) when K > 1")),
    shell("tracekit:calls(\"tracekit_demo_shell:handle_call(Req, _, _) when Size > 1\")."),
    {error, _} = result(tracekit:calls("tracekit_demo_shell:handle_call(Req, _, _) when Size > 1")),
    gen_server:stop(Kv).

%% Prints a result the way the shell would, and returns it.
result(R) ->
    io:format("~tp~n", [R]),
    R.

shell(Command) ->
    io:format("~n> ~ts~n", [Command]).

%% Waits until a trace ends at a limit (its summary is then printed).
wait(T) ->
    Mon = monitor(process, T),
    receive {'DOWN', Mon, process, T, _} -> ok end.

%% A client of demo_kv: a request for Key every millisecond or so.
client(Key) ->
    _ = gen_server:call(demo_kv, {get, Key}),
    timer:sleep(1),
    client(Key).

ticks(I, N) when I > N -> ok;
ticks(I, N) -> _ = tick(I), ticks(I + 1, N).

%% @private
tick(I) -> I.

%% @private
init(State) -> {ok, State}.

%% @private
handle_call({get, archive}, _From, State) ->
    {reply, ?MODULE:lookup(archive), State};
handle_call({get, Key}, _From, State) ->
    {reply, maps:get(Key, State, undefined), State};
handle_call({put, Key, Value}, _From, State) ->
    {reply, ok, State#{Key => Value}}.

%% @private
handle_cast(_, State) -> {noreply, State}.

%% @private A slow lookup: 2 ms, now and then 10.
lookup(archive) ->
    timer:sleep(case rand:uniform(20) of 1 -> 10; _ -> 2 end),
    old.
