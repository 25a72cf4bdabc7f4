%% Benchmarks of a trace across nodes (make bench; a distributed VM): with
%% 1, 3 and 5 nodes of this machine (peers), how long a trace takes to
%% start (checks, clock offsets, an agent per node), how many events a
%% second the calling node merges and collects, and prints to an io device
%% that takes every line at once; and how well the clocks are known.
-module(tracekit_cluster_bench).

-export([main/0, tick/1]).

-define(EVENTS_PER_NODE, 200000).

main() ->
    io:format("~ntraces across nodes (peers of this machine, ~p schedulers each):~n"
              "  ~-6s ~12s ~14s ~16s ~16s~n",
              [erlang:system_info(schedulers_online), "nodes", "start ms",
               "clock err us", "merged ev/s", "printed ev/s"]),
    [row(N) || N <- [1, 3, 5]],
    ok.

row(N) ->
    Peers = [start_peer() || _ <- lists:seq(1, N - 1)],
    Nodes = [node() | [Node || {_, Node} <- Peers]],
    try
        StartMs = median([start_ms(Nodes) || _ <- lists:seq(1, 5)]),
        {Rate, Err} = merged_rate(Nodes, #{print => false}),
        {Printed, _} = merged_rate(Nodes, #{io => null_device(), max_events => infinity}),
        io:format("  ~-6w ~12.1f ~14w ~16w ~16w~n", [N, StartMs, Err, Rate, Printed])
    after
        [peer:stop(P) || {P, _} <- Peers]
    end.

start_peer() ->
    Paths = [filename:dirname(code:which(M)) || M <- [tracekit, ?MODULE]],
    {ok, P, Node} = peer:start_link(#{name => peer:random_name(tkbench),
                                      args => lists:append([["-pa", D] || D <- Paths])}),
    {P, Node}.

start_ms(Nodes) ->
    T0 = erlang:monotonic_time(microsecond),
    {ok, T} = tracekit:calls("tracekit_cluster_bench:tick/1",
                             #{nodes => Nodes, print => false}),
    Us = erlang:monotonic_time(microsecond) - T0,
    {ok, _} = tracekit:stop(T),
    Us / 1000.

%% Every node calls tick/1 EVENTS_PER_NODE times at once; the rate is the
%% events the calling node took in, over the time until it had them all.
merged_rate(Nodes, Opts) ->
    Total = ?EVENTS_PER_NODE * length(Nodes),
    {ok, T} = tracekit:calls("tracekit_cluster_bench:tick/1",
                             Opts#{nodes => Nodes, max_events => Total,
                                   max_time => 120000, ring_size => 16 bsl 20}),
    Go = make_ref(),
    Self = self(),
    T0 = erlang:monotonic_time(microsecond),
    _ = [erpc:call(Node, erlang, spawn,
                   [fun() -> [tick(I) || I <- lists:seq(1, ?EVENTS_PER_NODE)], Self ! Go end])
         || Node <- Nodes],
    [receive Go -> ok end || _ <- Nodes],
    {ok, #{shown := Shown, clocks := Clocks}} = tracekit:wait(T, 120000),
    Us = erlang:monotonic_time(microsecond) - T0,
    Err = lists:max([E || {_, E} <- maps:values(Clocks)]),
    {round(Shown * 1000000 / Us), Err}.

tick(X) -> X.

%% An io device that takes every request at once.
null_device() ->
    spawn(fun Loop() ->
                  receive
                      {io_request, From, Ref, _} -> From ! {io_reply, Ref, ok}, Loop()
                  end
          end).

median(L) -> lists:nth((length(L) + 1) div 2, lists:sort(L)).
