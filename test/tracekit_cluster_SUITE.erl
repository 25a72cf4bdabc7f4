%% tracekit across nodes: the shell API with `nodes' on this node and two
%% or three peers. The merged stream (per-process order exact on every
%% node, a request and its reply across nodes in causal order), the
%% cluster-wide limit, a node killed or disconnected mid-trace, cleanup
%% when the origin goes away, a node without tracekit, and trace files
%% fetched from every node.
-module(tracekit_cluster_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([suite/0, all/0, init_per_suite/1, end_per_suite/1,
         init_per_testcase/2, end_per_testcase/2]).
-export([merged_order/1, lines_show_their_node/1, request_reply_across_nodes/1,
         seq_flow_across_nodes/1, seq_sends_beyond_a_batch/1,
         limit_is_exact_across_nodes/1, node_killed/1, node_disconnected/1,
         caller_killed/1, origin_node_stopped/1, node_without_tracekit/1,
         bad_nodes/1, files_fetched/1, files_in_deep_dir/1,
         stop_when_monitored_from_another_node/1, hidden_node/1,
         agent_killed_leaves_no_file/1, node_cannot_write_its_file/1,
         other_protocol_refused/1, older_tracekit_refused/1, frozen_node_is_late/1,
         file_counts_per_node/1, disconnection_keeps_remote_files/1,
         remote_files_are_private/1, stopped_node_leaves_nothing_once_restarted/1,
         own_work_is_not_traced/1, lent_node_cleaned_when_caller_killed/1,
         other_release_is_refused/1, lent_node_measures_latency/1]).
%% Called on the nodes.
-export([tick/1, ticker/2, server/0, start_trace/2, seq_pinger/4]).

suite() ->
    [{timetrap, {minutes, 2}}].

all() ->
    [merged_order, lines_show_their_node, request_reply_across_nodes,
     seq_flow_across_nodes, seq_sends_beyond_a_batch,
     limit_is_exact_across_nodes, node_killed, node_disconnected, caller_killed,
     origin_node_stopped, node_without_tracekit, bad_nodes, files_fetched,
     files_in_deep_dir, stop_when_monitored_from_another_node, hidden_node,
     agent_killed_leaves_no_file, node_cannot_write_its_file,
     other_protocol_refused, older_tracekit_refused, frozen_node_is_late,
     file_counts_per_node, disconnection_keeps_remote_files, remote_files_are_private,
     stopped_node_leaves_nothing_once_restarted, own_work_is_not_traced,
     lent_node_cleaned_when_caller_killed, other_release_is_refused,
     lent_node_measures_latency].

init_per_suite(Config) ->
    case node() of
        nonode@nohost ->
            _ = os:cmd(epmd() ++ " -daemon"),
            timer:sleep(200),
            {ok, _} = net_kernel:start(tracekit_cluster_ct, #{name_domain => shortnames}),
            [{stop_dist, true} | Config];
        _ ->
            Config
    end.

end_per_suite(Config) ->
    _ = [net_kernel:stop() || ?config(stop_dist, Config) =:= true],
    ok.

epmd() ->
    case os:find_executable("epmd") of
        false -> filename:join([code:root_dir(), "erts-" ++ erlang:system_info(version),
                                "bin", "epmd"]);
        Path -> Path
    end.

init_per_testcase(_, Config) ->
    [{io, tk_capture:start()} | Config].

end_per_testcase(_, Config) ->
    ok = tracekit:stop(),
    tk_capture:stop(?config(io, Config)),
    ok.

%% Peers with tracekit and this suite in their code path (or not).
peers(N) -> peers(N, true).

peers(N, WithTracekit) ->
    Paths = [filename:dirname(code:which(M))
             || M <- [?MODULE | [tracekit || WithTracekit]]],
    [begin
         {ok, P, Node} = peer:start_link(#{name => peer:random_name(?MODULE),
                                           args => lists:append([["-pa", D] || D <- Paths])}),
         {P, Node}
     end || _ <- lists:seq(1, N)].

stop_peers(Peers) ->
    [try peer:stop(P) catch _:_ -> ok end || {P, _} <- Peers],
    ok.

tick(X) -> X.

%% Calls tick(1..N) in a new process of this node; returns its pid.
ticker(N, Go) ->
    spawn(fun() -> receive Go -> ok end, [tick_pause(I) || I <- lists:seq(1, N)] end).

%% A short pause every 100 calls: calls of the nodes interleave over a
%% longer time than one batch.
tick_pause(I) when I rem 100 =:= 0 -> timer:sleep(2), tick(I);
tick_pause(I) -> tick(I).

%% A server that answers {req, From, X} with {reply, X}.
server() ->
    spawn(fun Loop() -> receive {req, From, X} -> From ! {reply, X}, Loop() end end).

start_trace(Spec, Opts) ->
    tracekit:calls(Spec, Opts).

tracekit_sessions(Node) ->
    [S || {tracekit, _} = S <- erpc:call(Node, trace, session_info, [all])].

%% Runs N ticks on each node at once, traced; returns the collected events.
ticks_everywhere(Nodes, N, Opts) ->
    Go = make_ref(),
    {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                             Opts#{nodes => Nodes, print => false,
                                   max_events => maps:get(max_events, Opts, infinity)}),
    Tickers = [erpc:call(Node, ?MODULE, ticker, [N, Go]) || Node <- Nodes],
    [P ! Go || P <- Tickers],
    {T, Tickers}.

%%% The merged stream ----------------------------------------------------------

%% Three nodes calling at once: every call of every node is there once, in
%% each process's own order, and the stream is in time order.
merged_order(_Config) ->
    Peers = peers(2),
    Nodes = [node() | [N || {_, N} <- Peers]],
    try
        N = 2000,
        {T, Tickers} = ticks_everywhere(Nodes, N, #{}),
        wait_dead(Tickers),
        timer:sleep(200),
        {ok, #{reason := stopped, shown := Shown, dropped := 0, events := Events,
               nodes := PerNode, clocks := Clocks}} = tracekit:stop(T),
        ct:log("~p~nclock offsets and their error bounds (us): ~p", [PerNode, Clocks]),
        ?assertEqual(3 * N, Shown),
        [?assertEqual(lists:seq(1, N), [I || {trace_ts, P1, call, {_, tick, [I]}, _} <- Events,
                                             P1 =:= P])
         || P <- Tickers],
        [?assertMatch(#{shown := N, dropped := 0, state := closed}, maps:get(Node, PerNode))
         || Node <- Nodes],
        %% In time order across the nodes: each event's time less its
        %% node's measured offset. Within a node the events come in the
        %% order the tracer recorded them, which for processes on
        %% different schedulers can differ from their timestamps' by the
        %% time between the VM's timestamp and the record: short, but as
        %% long as the OS keeps that scheduler's thread off its core (48
        %% ms seen on this loaded machine), so few events of the run are
        %% out of order by more than 1 ms (none in a quiet run; 202 of the
        %% 6,000 in a VM under AddressSanitizer, whose callbacks are slow,
        %% on a loaded machine, and 601 with a busy loop beside it on
        %% both cores). A merge that let one node's batch go before
        %% another's puts every event of the other nodes in that time out
        %% of order, by up to the length of a batch: 3,458 of them with
        %% the horizon check left out (3,299 again now). The count is
        %% judged (at most a quarter), the longest only logged.
        Times = [tracekit_nodes:event_time(E) - element(1, maps:get(node(element(2, E)), Clocks))
                 || E <- Events],
        {Late, LateEvents} = lateness(Times, 1000),
        ct:log("events out of timestamp order by at most ~p us; ~p of them by more than "
               "1 ms", [Late, LateEvents]),
        ?assert(LateEvents =< 3 * N div 4),
        %% The same machine: the offsets are within their error bounds of 0
        %% (and the bounds small).
        [?assert(abs(Off) =< Err + 1000 andalso Err < 50000)
         || {Off, Err} <- maps:values(Clocks)]
    after
        stop_peers(Peers)
    end.

%% How far the times go back at most, and how many go back by more than
%% Us.
lateness([T | Ts], Us) ->
    {_, Late, Count} = lists:foldl(fun(X, {Max, L, C}) ->
                                           {max(Max, X), max(L, Max - X),
                                            C + if Max - X > Us -> 1; true -> 0 end}
                                   end, {T, 0, 0}, Ts),
    {Late, Count}.

lines_show_their_node(Config) ->
    Io = ?config(io, Config),
    Peers = peers(1),
    [{_, Peer}] = Peers,
    try
        {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                 #{nodes => [node(), Peer], io => Io}),
        tick(1),
        Go = make_ref(),
        P = erpc:call(Peer, ?MODULE, ticker, [1, Go]),
        P ! Go,
        tk_capture:wait_for(Io, "tick\\(1\\)$", 5000),
        {ok, #{shown := 2, nodes := #{Peer := #{shown := 1}}}} = tracekit:stop(T),
        [Header | Lines] = tk_capture:lines(Io),
        ct:log("~ts", [lists:join("\n", [Header | Lines])]),
        ?assertMatch({match, _}, re:run(Header, " on .* \\(clocks known within [0-9]+ us\\)")),
        [?assertNotEqual(nomatch, string:find(Header, atom_to_list(N) ++ [Sep]))
         || {N, Sep} <- lists:zip(lists:sort([node(), Peer]), ", ")],
        [Mine] = [L || L <- Lines, lists:prefix(atom_to_list(node()) ++ " ", L)],
        [Theirs] = [L || L <- Lines, lists:prefix(atom_to_list(Peer) ++ " ", L)],
        ?assertMatch({match, _}, re:run(Mine, "tracekit_cluster_SUITE:tick\\(1\\)$")),
        ?assertMatch({match, _}, re:run(Theirs, "tracekit_cluster_SUITE:tick\\(1\\)$")),
        ?assert(lists:any(fun(L) -> string:find(L, "   " ++ atom_to_list(Peer) ++ ": 1 shown, 0 dropped") =/= nomatch end, Lines))
    after
        stop_peers(Peers)
    end.

%% A request from this node to a server on a peer and its reply: send,
%% receive there, send back, receive here, in that order, each time.
request_reply_across_nodes(Config) ->
    Peers = peers(1),
    [{_, Peer}] = Peers,
    try
        Server = registered_server(Peer),
        Self = self(),
        {ok, T} = tracekit:messages([Self, tk_cluster_server], #{nodes => [node(), Peer],
                                                                 print => false,
                                                                 max_events => infinity}),
        ask(Server, 50),
        timer:sleep(100),
        {ok, #{events := Events}} = tracekit:stop(T),
        Flow = [{Who, What, I} || E <- Events,
                                  {Who, What, Msg} <- [message(E)],
                                  I <- [req_or_reply(Msg)], I =/= none],
        ?assertEqual(round_trips(Self, Server, 50), Flow),
        %% Printed, the server's lines name it (its node looked it up).
        Io = ?config(io, Config),
        {ok, T2} = tracekit:messages([tk_cluster_server], #{nodes => [node(), Peer], io => Io}),
        Server ! {req, Self, 0},
        receive {reply, 0} -> ok end,
        tk_capture:wait_for(Io, "tk_cluster_server.*\\{reply,0\\}", 5000),
        {ok, _} = tracekit:stop(T2)
    after
        stop_peers(Peers)
    end.

%% The same flow followed by seq_trace only (as tracekit_cth records it,
%% the server not traced otherwise), the request sent to the server's
%% registered name: its receipt on the peer comes after its send here
%% whatever the measured clocks say. Ordered by their timestamps alone,
%% the peer's receipts came before their sends in each of three runs on
%% this machine (a message takes about 40 us from node to node here; the
%% peer's clock offset was known within 59 us).
seq_flow_across_nodes(_Config) ->
    Peers = peers(1),
    [{_, Peer}] = Peers,
    try
        registered_server(Peer),
        {ok, Opts} = tracekit_cth:check_options(#{nodes => [Peer], seq_trace => true,
                                                  events => 10000}),
        {ok, T} = tracekit_case:record(Opts, {?MODULE, seq_flow_across_nodes, 1}),
        ok = tracekit_case:seq_token(Opts),
        ask({tk_cluster_server, Peer}, 50),
        _ = seq_trace:set_token([]),
        timer:sleep(100),
        {ok, #{events := Events, dropped := 0, clocks := Clocks}} = tracekit:stop(T),
        ct:log("clock offsets and their error bounds (us): ~p", [Clocks]),
        Flow = [{node(Where), What, I} || {seq_trace, _, {What, _, _, _, Msg} = Info, _} <- Events,
                                          Where <- [seq_where(Info)],
                                          I <- [req_or_reply(Msg)], I =/= none],
        ?assertEqual(round_trips(node(), Peer, 50), Flow)
    after
        stop_peers(Peers)
    end.

%% A server (server/0) on Peer, registered there as tk_cluster_server.
registered_server(Peer) ->
    Server = erpc:call(Peer, ?MODULE, server, []),
    true = erpc:call(Peer, erlang, register, [tk_cluster_server, Server]),
    Server.

%% Asks Server for 1..N in turn, each reply awaited.
ask(Server, N) ->
    Self = self(),
    [begin Server ! {req, Self, I}, receive {reply, I} -> ok end end || I <- lists:seq(1, N)],
    ok.

%% What asking for 1..N shows, as {Who, What, I}: the request's send by
%% Client and receipt by Server, the reply's send by Server and receipt by
%% Client.
round_trips(Client, Server, N) ->
    lists:append([[{Client, send, I}, {Server, 'receive', I},
                   {Server, send, I}, {Client, 'receive', I}] || I <- lists:seq(1, N)]).

%% A peer's process sends 5,000 messages with a seq_trace token to a
%% process here, faster than one batch (1,000 events) a request: the
%% peer's ring holds older sends than the last batch brought. Every
%% receipt comes after its send, whether the token asks for timestamps,
%% for monotonic ones (of each VM alone: the merge times those events by
%% their arrival) or for none. (A full batch answered with a horizon of
%% now let this node's receipts go out ahead of the sends still in the
%% peer's ring: 3,248 of 5,000 in a run with timestamps. Without
%% timestamps, 1,109 while a full batch still moved the horizon to the
%% time its last event arrived here.)
seq_sends_beyond_a_batch(_Config) ->
    Peers = peers(1),
    [{_, Peer}] = Peers,
    N = 5000,
    try
        [begin
             Sink = spawn(fun Loop() -> receive stop -> ok; _ -> Loop() end end),
             Go = make_ref(),
             Pinger = erpc:call(Peer, ?MODULE, seq_pinger, [Sink, N, Go, Stamp]),
             {ok, Opts} = tracekit_cth:check_options(#{nodes => [Peer], seq_trace => true,
                                                       events => 4 * N}),
             {ok, T} = tracekit_case:record(Opts, {?MODULE, seq_sends_beyond_a_batch, 1}),
             M = monitor(process, Pinger),
             Pinger ! Go,
             receive {'DOWN', M, process, Pinger, normal} -> ok after 60000 -> ct:fail(pinger) end,
             timer:sleep(300),
             {ok, #{events := Events, dropped := 0}} = tracekit:stop(T),
             Sink ! stop,
             Flow = [X || E <- Events, X <- [tick_flow(E)], X =/= none],
             ?assertEqual({Stamp, 2 * N}, {Stamp, length(Flow)}),
             ?assertEqual({Stamp, 0}, {Stamp, receipts_before_sends(Flow)})
         end || Stamp <- [[timestamp], [], [monotonic_timestamp]]]
    after
        stop_peers(Peers)
    end.

tick_flow({seq_trace, _, {What, _, _, _, {tick, I}}}) -> {What, I};
tick_flow({seq_trace, _, {What, _, _, _, {tick, I}}, _}) -> {What, I};
tick_flow(_) -> none.

receipts_before_sends(Flow) ->
    {Early, _} = lists:foldl(fun({send, I}, {E, Sent}) -> {E, Sent#{I => true}};
                                ({'receive', I}, {E, Sent}) when is_map_key(I, Sent) -> {E, Sent};
                                ({'receive', _}, {E, Sent}) -> {E + 1, Sent}
                             end, {0, #{}}, Flow),
    Early.

%% On a peer: a process that, told Go, sends {tick, N..1} to To with a
%% seq_trace token (sends and receipts, and the timestamp flags Stamp), a
%% little work between two sends.
seq_pinger(To, N, Go, Stamp) ->
    spawn(fun() ->
                  receive Go -> ok end,
                  _ = seq_trace:set_token(label, 4242),
                  _ = [seq_trace:set_token(F, true) || F <- [send, 'receive' | Stamp]],
                  [begin To ! {tick, I}, _ = erlang:phash2(lists:seq(1, 50)) end
                   || I <- lists:seq(N, 1, -1)],
                  _ = seq_trace:set_token([])
          end).

%% The process a seq_trace event happened in: the sender of a send, the
%% receiver of a receipt.
seq_where({send, _, From, _, _}) -> From;
seq_where({'receive', _, _, To, _}) -> To.

message({trace_ts, Who, send, Msg, _To, _}) -> {Who, send, Msg};
message({trace_ts, Who, 'receive', Msg, _}) -> {Who, 'receive', Msg};
message(_) -> {none, none, none}.

req_or_reply({req, _, I}) -> I;
req_or_reply({reply, I}) -> I;
req_or_reply(_) -> none.

%% max_events counts across the cluster: exactly that many, and the
%% nodes' shares add up to it; nothing is counted twice.
limit_is_exact_across_nodes(_Config) ->
    Peers = peers(2),
    Nodes = [node() | [N || {_, N} <- Peers]],
    try
        {T, Tickers} = ticks_everywhere(Nodes, 500, #{max_events => 777}),
        wait_dead(Tickers),
        {ok, #{reason := {max_events, 777}, shown := 777, events := Events,
               nodes := PerNode, dropped := Dropped}} = tracekit:wait(T, 20000),
        ?assertEqual(777, length(Events)),
        ?assertEqual(777, lists:sum([S || #{shown := S} <- maps:values(PerNode)])),
        %% The rest were dropped, or came after the trace had ended and
        %% were never traced (a loaded machine may run a ticker late).
        ?assert(Dropped =< 1500 - 777),
        [?assertEqual([], tracekit_sessions(N)) || N <- Nodes]
    after
        stop_peers(Peers)
    end.

%%% Nodes that go ---------------------------------------------------------------

node_killed(Config) ->
    node_lost(Config, fun(Peer, _Node) -> exit(Peer, kill) end).

node_disconnected(Config) ->
    node_lost(Config, fun(_Peer, Node) -> true = erlang:disconnect_node(Node) end).

%% One of two peers goes mid-trace: one line says so, the others go on,
%% and the summary says what each node did.
node_lost(Config, Lose) ->
    Io = ?config(io, Config),
    Peers = peers(2),
    [{P1, N1}, {_, N2}] = Peers,
    try
        {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                 #{nodes => [node(), N1, N2], io => Io,
                                   max_events => infinity}),
        Go = make_ref(),
        [erpc:call(N, ?MODULE, ticker, [5, Go]) ! Go || N <- [N1, N2]],
        tk_capture:wait_for(Io, "^" ++ atom_to_list(N1) ++ " .*tick\\(5\\)", 5000),
        tk_capture:wait_for(Io, "^" ++ atom_to_list(N2) ++ " .*tick\\(5\\)", 5000),
        unlink(P1),
        Lose(P1, N1),
        tk_capture:wait_for(Io, "^tracekit: node " ++ atom_to_list(N1) ++ " is gone", 10000),
        %% The others go on.
        [erpc:call(N, ?MODULE, ticker, [3, Go]) ! Go || N <- [N2, node()]],
        tk_capture:wait_for(Io, "^" ++ atom_to_list(node()) ++ " .*tick\\(3\\)", 5000),
        tk_capture:wait_for(Io, "^" ++ atom_to_list(N2) ++ " .*tick\\(3\\)", 5000),
        {ok, #{nodes := PerNode}} = tracekit:stop(T),
        ct:log("~ts~n~p", [lists:join("\n", tk_capture:lines(Io)), PerNode]),
        ?assertMatch(#{shown := 5, state := {down, _}}, maps:get(N1, PerNode)),
        ?assertMatch(#{shown := 8, state := closed}, maps:get(N2, PerNode)),
        ?assertMatch(#{shown := 3, state := closed}, maps:get(node(), PerNode)),
        ?assertEqual([], tracekit_sessions(N2))
    after
        stop_peers(Peers)
    end.

%% The process that started the trace is killed: within 5 s every
%% node is as before (no tracekit session, every ring freed).
caller_killed(_Config) ->
    Peers = peers(2),
    Nodes = [node() | [N || {_, N} <- Peers]],
    try
        Alive0 = [{N, erpc:call(N, tracekit_ring, alive, [])} || N <- Nodes],
        Self = self(),
        Caller = spawn(fun() ->
                               {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                                        #{nodes => Nodes, print => false}),
                               Self ! {started, T},
                               receive never -> ok end
                       end),
        receive {started, _} -> ok after 20000 -> ct:fail(not_started) end,
        [?assertMatch([_], tracekit_sessions(N)) || N <- Nodes],
        exit(Caller, kill),
        clean_within(5000, Nodes, Alive0)
    after
        stop_peers(Peers)
    end.

%% The trace is started from a peer (the origin) on two other peers; the
%% origin node is stopped: within 5 s the others are as before (a VM
%% under AddressSanitizer on a loaded machine took over 1 s).
origin_node_stopped(_Config) ->
    Peers = peers(3),
    [{Origin, ON}, {_, N1}, {_, N2}] = Peers,
    try
        Alive0 = [{N, erpc:call(N, tracekit_ring, alive, [])} || N <- [N1, N2]],
        %% The peers know each other.
        pong = erpc:call(ON, net_adm, ping, [N1]),
        pong = erpc:call(ON, net_adm, ping, [N2]),
        Self = self(),
        _ = erpc:call(ON, erlang, spawn,
                      [fun() ->
                               Self ! {started, start_trace("tracekit_cluster_SUITE:tick/1",
                                                            #{nodes => [N1, N2],
                                                              print => false})},
                               receive never -> ok end
                       end]),
        receive {started, {ok, _}} -> ok after 20000 -> ct:fail(not_started) end,
        [?assertMatch([_], tracekit_sessions(N)) || N <- [N1, N2]],
        unlink(Origin),
        exit(Origin, kill),
        clean_within(5000, [N1, N2], Alive0)
    after
        stop_peers(Peers)
    end.

clean_within(Ms, Nodes, Alive0) ->
    T0 = erlang:monotonic_time(millisecond),
    Clean = fun() ->
                    lists:all(fun(N) ->
                                      _ = erpc:call(N, erlang, garbage_collect, []),
                                      tracekit_sessions(N) =:= [] andalso
                                          erpc:call(N, tracekit_ring, alive, [])
                                              =:= proplists:get_value(N, Alive0)
                              end, Nodes)
            end,
    wait_until(Clean, T0 + Ms),
    ct:log("clean after ~p ms", [erlang:monotonic_time(millisecond) - T0]).

wait_until(Pred, Until) ->
    case Pred() of
        true -> ok;
        false ->
            case erlang:monotonic_time(millisecond) > Until of
                true -> ?assert(Pred());
                false -> timer:sleep(20), wait_until(Pred, Until)
            end
    end.

%%% Nodes that cannot take part ---------------------------------------------------

%% A node without tracekit in its code path (and the same release): it is
%% lent tracekit for the trace, its events are there, and once the trace
%% is over the node is as it was: no module of tracekit loaded (nor old
%% code), no process running it, no directory left.
node_without_tracekit(Config) ->
    [{_, Good}] = Peers1 = peers(1),
    [{_, Bare}] = Peers2 = peers(1, false),
    try
        ?assertEqual(non_existing, erpc:call(Bare, code, which, [tracekit_agent])),
        {T, Tickers} = ticks_everywhere([node(), Good, Bare], 50, #{io => ?config(io, Config)}),
        wait_dead(Tickers),
        timer:sleep(200),
        {ok, #{events := Events, nodes := PerNode}} = tracekit:stop(T),
        ct:log("~p", [PerNode]),
        [?assertEqual(lists:seq(1, 50), [I || {trace_ts, P1, call, {_, tick, [I]}, _} <- Events,
                                              P1 =:= P])
         || P <- Tickers],
        ?assertMatch(#{shown := 50, state := closed}, maps:get(Bare, PerNode)),
        wait_until(fun() -> as_it_was(Bare) end, erlang:monotonic_time(millisecond) + 3000)
    after
        stop_peers(Peers1 ++ Peers2)
    end.

%% A latency trace on a node without tracekit: it is lent tracekit_latency
%% and its library too, its calls are measured there (every one of them),
%% and once the trace is over the node is as it was (the library's
%% consumer thread ended before its module was purged).
lent_node_measures_latency(_Config) ->
    [{_, Bare}] = Peers = peers(1, false),
    try
        ?assertEqual(non_existing, erpc:call(Bare, code, which, [tracekit_latency])),
        Go = make_ref(),
        Ticker = erpc:call(Bare, ?MODULE, ticker, [300, Go]),
        {ok, T} = tracekit:latency("tracekit_cluster_SUITE:tick/1",
                                   #{nodes => [node(), Bare], print => false,
                                     max_time => infinity}),
        ?assertMatch({file, _}, erpc:call(Bare, code, is_loaded, [tracekit_latency])),
        Ticker ! Go,
        wait_dead([Ticker]),
        {ok, #{latency_nodes := PerNode, latency := Merged} = S} = tracekit:stop(T),
        ct:log("~p", [maps:without([histograms, histograms_nodes], S)]),
        ?assertMatch(#{count := 300, exceptions := 0},
                     maps:get({?MODULE, tick, 1}, maps:get(Bare, PerNode))),
        ?assertMatch(#{count := 300}, maps:get({?MODULE, tick, 1}, Merged)),
        wait_until(fun() -> as_it_was(Bare) end, erlang:monotonic_time(millisecond) + 3000)
    after
        stop_peers(Peers)
    end.

%% The process that started a trace on a node that was lent tracekit is
%% killed: the node is as it was soon after.
lent_node_cleaned_when_caller_killed(_Config) ->
    [{_, Bare}] = Peers = peers(1, false),
    try
        Self = self(),
        Caller = spawn(fun() ->
                               {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                                        #{nodes => [node(), Bare], print => false}),
                               Self ! {started, T},
                               receive never -> ok end
                       end),
        receive {started, _} -> ok after 20000 -> ct:fail(not_started) end,
        ?assertNotEqual(non_existing, erpc:call(Bare, code, which, [tracekit_agent])),
        exit(Caller, kill),
        wait_until(fun() -> as_it_was(Bare) end, erlang:monotonic_time(millisecond) + 3000)
    after
        stop_peers(Peers)
    end.

as_it_was(Node) ->
    Loaded = [M || {M, _} <- erpc:call(Node, code, all_loaded, []),
                   lists:prefix("tracekit", atom_to_list(M)),
                   M =/= ?MODULE],
    Old = [M || M <- [tracekit_agent, tracekit_ring, tracekit_latency, tracekit_push,
                      tracekit_nif],
                erpc:call(Node, erlang, check_old_code, [M])],
    Dirs = erpc:call(Node, filelib, wildcard, ["/tmp/tracekit-" ++ atom_to_list(Node) ++ "-*"]),
    Loaded =:= [] andalso Old =:= [] andalso Dirs =:= []
        andalso tracekit_sessions(Node) =:= [].

%% A node without tracekit that runs another release: refused with the
%% reason, nothing traced anywhere. (The other release is the one
%% scripts/otp provisions beside this one.)
other_release_is_refused(_Config) ->
    Mine = erlang:system_info(otp_release),
    Other = case Mine of "27" -> "29"; _ -> "27" end,
    Cache = case os:getenv("TRACEKIT_CACHE") of
                false -> filename:join([os:getenv("HOME"), ".cache", "tracekit"]);
                C -> C
            end,
    case filelib:wildcard(filename:join([Cache, "otp-" ++ Other ++ "-*", "root", "usr", "bin", "erl"])) of
        [] ->
            {skip, "OTP " ++ Other ++ " is not provisioned here"};
        [Erl | _] ->
            Path = filename:dirname(code:which(?MODULE)),
            {ok, P, Node} = peer:start_link(#{name => peer:random_name(?MODULE), exec => Erl,
                                              args => ["-pa", Path]}),
            try
                R = tracekit:calls("tracekit_cluster_SUITE:tick/1", #{nodes => [node(), Node]}),
                ct:log("~p", [R]),
                {error, {bad_node, Node, Why}} = R,
                ?assert(lists:prefix("tracekit is not loaded there, and it cannot be lent: it "
                                     "runs OTP " ++ Other, Why)),
                ?assertEqual([], tracekit_sessions(node())),
                ?assertEqual([], [M || {M, _} <- erpc:call(Node, code, all_loaded, []),
                                       lists:prefix("tracekit_", atom_to_list(M)),
                                       M =/= ?MODULE])
            after
                peer:stop(P)
            end
    end.

bad_nodes(_Config) ->
    ?assertMatch({error, {bad_node, 'nosuch@nohost', "not connected" ++ _}},
                 tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                #{nodes => [node(), 'nosuch@nohost']})),
    [?assertMatch({error, {bad_option, {nodes, Bad}, "nodes is all or a list" ++ _}},
                  tracekit:calls("tracekit_cluster_SUITE:tick/1", #{nodes => Bad}))
     || Bad <- [[], none, "a@b", [a | b], [1]]],
    ?assertMatch({error, {bad_process, _, _}},
                 tracekit:messages([self(), no_such_name_anywhere], #{nodes => [node()]})),
    ?assertEqual([], tracekit_sessions(node())).

%%% Trace files ---------------------------------------------------------------------

%% With file => Dir each node writes its own trace file, and the others'
%% are fetched into Dir: read together, every call of every node.
files_fetched(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "cluster_files"),
    ok = filelib:ensure_path(Dir),
    Peers = peers(2),
    Nodes = [node() | [N || {_, N} <- Peers]],
    try
        {T, Tickers} = ticks_everywhere(Nodes, 300, #{file => Dir}),
        wait_dead(Tickers),
        timer:sleep(200),
        {ok, #{shown := 900, dropped := 0, file := Dir, files := Files,
               nodes := PerNode}} = tracekit:stop(T),
        ct:log("~p~n~p", [Files, PerNode]),
        ?assertEqual(lists:sort([filename:join(Dir, atom_to_list(N) ++ ".tkt") || N <- Nodes]),
                     Files),
        {ok, Events} = tracekit_file:read(Files),
        [?assertEqual(lists:seq(1, 300), [I || {trace_ts, P1, call, {_, tick, [I]}, _} <- Events,
                                               P1 =:= P])
         || P <- Tickers],
        %% Nothing is left in the peers' temporary directories.
        [?assertEqual([], erpc:call(N, filelib, wildcard, ["/tmp/tracekit-" ++ atom_to_list(N) ++ "-*"]))
         || N <- Nodes]
    after
        stop_peers(Peers)
    end.

%% The directory as a deep file name (characters, a binary, an atom), as
%% the option of a trace of one node takes it: the files are written and
%% fetched there.
files_in_deep_dir(Config) ->
    Priv = ?config(priv_dir, Config),
    Dir = filename:join(Priv, "deep_dir"),
    ok = filelib:ensure_path(Dir),
    Deep = [Priv, [$/, <<"deep">>], '_dir'],
    Peers = peers(1),
    Nodes = [node() | [N || {_, N} <- Peers]],
    try
        {T, Tickers} = ticks_everywhere(Nodes, 10, #{file => Deep}),
        wait_dead(Tickers),
        timer:sleep(200),
        {ok, #{shown := 20, files := Files}} = tracekit:stop(T),
        ?assertEqual(lists:sort([filename:join(Dir, atom_to_list(N) ++ ".tkt") || N <- Nodes]),
                     lists:sort(Files)),
        {ok, Events} = tracekit_file:read(Files),
        ?assertEqual(20, length(Events))
    after
        stop_peers(Peers)
    end.

%% tracekit:stop/0 looks for the caller's traces among the processes
%% that monitor it: one of another node is not one of them.
stop_when_monitored_from_another_node(Config) ->
    [{_, Node}] = Peers = peers(1),
    try
        Self = self(),
        Watcher = erpc:call(Node, erlang, spawn,
                            [fun() -> _ = monitor(process, Self), receive after infinity -> ok end end]),
        tk_collector:eventually(fun() ->
                                        {monitored_by, Ms} = process_info(self(), monitored_by),
                                        lists:member(Watcher, Ms)
                                end),
        {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                 #{nodes => [node(), Node], io => ?config(io, Config)}),
        ?assertEqual(ok, tracekit:stop()),
        ?assertEqual({error, not_running}, tracekit:stop(T)),
        [?assertEqual([], tracekit_sessions(N)) || N <- [node(), Node]]
    after
        stop_peers(Peers)
    end.

%% A hidden node that is connected can be named in nodes (all is this
%% node and the visible ones).
hidden_node(_Config) ->
    Ebin = filename:dirname(code:which(tracekit)),
    Suite = filename:dirname(code:which(?MODULE)),
    {ok, P, Node} = peer:start_link(#{name => peer:random_name(?MODULE),
                                      args => ["-hidden", "-pa", Ebin, "-pa", Suite]}),
    try
        ?assert(lists:member(Node, nodes(hidden))),
        {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                 #{nodes => [node(), Node], print => false}),
        5 = erpc:call(Node, ?MODULE, tick, [5]),
        timer:sleep(100),
        {ok, #{events := [{trace_ts, _, call, {?MODULE, tick, [5]}, _}],
               nodes := #{Node := #{shown := 1}}}} = tracekit:stop(T),
        ?assertEqual([], tracekit_sessions(Node))
    after
        stop_peers([{P, Node}])
    end.

%% The agent of a node that writes a trace file is killed: its file in
%% the node's temporary directory is deleted all the same, and the trace
%% goes on with the other nodes.
agent_killed_leaves_no_file(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "agent_killed"),
    ok = filelib:ensure_path(Dir),
    [{_, Node}] = Peers = peers(1),
    Temp = fun() -> erpc:call(Node, filelib, wildcard,
                              ["/tmp/tracekit-" ++ atom_to_list(Node) ++ "-*/*.tkt"]) end,
    try
        {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                 #{nodes => [node(), Node], file => Dir, io => ?config(io, Config)}),
        ?assertMatch([_], Temp()),
        [Agent] = [P || P <- erpc:call(Node, erlang, processes, []),
                        {current_function, {tracekit_agent, loop, 1}}
                            =:= erpc:call(Node, erlang, process_info, [P, current_function])],
        erpc:call(Node, erlang, exit, [Agent, kill]),
        tk_collector:eventually(fun() -> Temp() =:= [] end),
        {ok, #{nodes := #{Node := #{state := {down, killed}}}}} = tracekit:stop(T),
        ?assertEqual([], tracekit_sessions(Node))
    after
        stop_peers(Peers)
    end.

%% A node whose temporary directory cannot be written: an error that
%% names the node and says why, and nothing traced anywhere.
node_cannot_write_its_file(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "cannot_write"),
    ok = filelib:ensure_path(Dir),
    Ebin = filename:dirname(code:which(tracekit)),
    {ok, P, Node} = peer:start_link(#{name => peer:random_name(?MODULE),
                                      args => ["-pa", Ebin],
                                      env => [{"TMPDIR", "/nonexistent/tracekit"}]}),
    try
        R = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                           #{nodes => [node(), Node], file => Dir, io => ?config(io, Config)}),
        ct:log("~p", [R]),
        ?assertMatch({error, {bad_node, Node, "cannot make a private directory for its trace "
                              "file in /nonexistent/tracekit: " ++ _}}, R),
        [?assertEqual([], tracekit_sessions(N)) || N <- [node(), Node]]
    after
        stop_peers([{P, Node}])
    end.

%%% Nodes of another tracekit ------------------------------------------------------

%% A node whose tracekit speaks another protocol (another release of it,
%% with the same application version): refused at once with both
%% versions, nothing traced anywhere; so is a node of the protocol before
%% this one (2, before latency traces), for a trace of calls and for a
%% latency trace.
other_protocol_refused(Config) ->
    [{_, Node}] = Peers = peers(1),
    Mine = tracekit_proto:version(),
    ?assert(Mine >= 3),
    try
        Src = filename:join([code:lib_dir(tracekit), "src", "tracekit_proto.erl"]),
        [begin
             {ok, Mod, Bin} = compile:file(Src, [binary, {d, 'TRACEKIT_PROTOCOL', V}]),
             {module, Mod} = erpc:call(Node, code, load_binary,
                                       [Mod, "tracekit_proto.erl", Bin]),
             T0 = erlang:monotonic_time(millisecond),
             R = Start(),
             Ms = erlang:monotonic_time(millisecond) - T0,
             ct:log("protocol ~p: ~p in ~p ms", [V, R, Ms]),
             Expected = "it runs tracekit of protocol " ++ integer_to_list(V)
                 ++ ", this node protocol " ++ integer_to_list(Mine),
             {error, {bad_node, Node, Why}} = R,
             ?assert(lists:prefix(Expected, Why)),
             ?assert(Ms < 3000),
             [?assertEqual([], tracekit_sessions(N)) || N <- [node(), Node]]
         end || V <- [1, Mine - 1],
                Start <- [fun() -> tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                                  #{nodes => [node(), Node],
                                                    io => ?config(io, Config)})
                          end,
                          fun() -> tracekit:latency("tracekit_cluster_SUITE:tick/1",
                                                    #{nodes => [node(), Node],
                                                      io => ?config(io, Config)})
                          end]]
    after
        stop_peers(Peers)
    end.

%% A node with a tracekit from before the protocol had a version (no
%% tracekit_proto there): refused as protocol 1.
older_tracekit_refused(Config) ->
    [{_, Node}] = Peers = peers(1),
    try
        {module, tracekit_agent} = erpc:call(Node, code, ensure_loaded, [tracekit_agent]),
        true = erpc:call(Node, code, del_path, [filename:dirname(code:which(tracekit))]),
        _ = erpc:call(Node, code, purge, [tracekit_proto]),
        _ = erpc:call(Node, code, delete, [tracekit_proto]),
        R = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                           #{nodes => [node(), Node], io => ?config(io, Config)}),
        ct:log("~p", [R]),
        {error, {bad_node, Node, Why}} = R,
        ?assert(lists:prefix("it runs tracekit of protocol 1, this node protocol "
                             ++ integer_to_list(tracekit_proto:version()), Why)),
        [?assertEqual([], tracekit_sessions(N)) || N <- [node(), Node]]
    after
        stop_peers(Peers)
    end.

%% A node frozen mid-trace (SIGSTOP) does not hold the others: their
%% events flow on, the trace ends at its time, and every call of the
%% healthy node is shown or counted as dropped; the frozen one is late.
frozen_node_is_late(_Config) ->
    [{_, Frozen}] = Peers = peers(1),
    OsPid = erpc:call(Frozen, os, getpid, []),
    try
        {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                 #{nodes => [node(), Frozen], print => false,
                                   max_events => infinity, max_time => infinity}),
        Go = make_ref(),
        erpc:call(Frozen, ?MODULE, ticker, [100, Go]) ! Go,
        timer:sleep(300),
        _ = os:cmd("kill -STOP " ++ OsPid),
        N = 4000,
        Ticker = ticker(N, Go),
        Ticker ! Go,
        wait_dead([Ticker]),
        timer:sleep(tracekit_nodes:late_ms() + 500),
        T0 = erlang:monotonic_time(millisecond),
        {ok, #{nodes := PerNode, events := Events}} = tracekit:stop(T),
        Ms = erlang:monotonic_time(millisecond) - T0,
        ct:log("stopped in ~p ms~n~p", [Ms, PerNode]),
        #{shown := Shown, dropped := Dropped, state := closed} = maps:get(node(), PerNode),
        ?assertEqual(N, Shown + Dropped),
        ?assertEqual(N, length([E || {trace_ts, P, call, _, _} = E <- Events, P =:= Ticker])),
        ?assertMatch(#{state := {late, _}}, maps:get(Frozen, PerNode)),
        ?assert(Ms < tracekit_nodes:late_ms() + 3000)
    after
        _ = os:cmd("kill -CONT " ++ OsPid),
        stop_peers(Peers)
    end.

%%% Trace files across nodes -----------------------------------------------------

%% In file mode each node's shown count is the events its file holds
%% (counted only once the node has closed, its last events written), run
%% after run.
file_counts_per_node(Config) ->
    Peers = peers(2),
    Nodes = [node() | [N || {_, N} <- Peers]],
    try
        [begin
             Dir = filename:join(?config(priv_dir, Config), "counts" ++ integer_to_list(I)),
             ok = filelib:ensure_path(Dir),
             {T, Tickers} = ticks_everywhere(Nodes, 2000, #{file => Dir}),
             timer:sleep(20 * I),
             {ok, #{nodes := PerNode, files := Files}} = tracekit:stop(T),
             wait_dead(Tickers),
             ct:log("~p", [PerNode]),
             [begin
                  File = filename:join(Dir, atom_to_list(Node) ++ ".tkt"),
                  ?assert(lists:member(File, Files)),
                  {ok, Events} = tracekit_file:read(File),
                  ?assertMatch(#{shown := S} when S =:= length(Events), maps:get(Node, PerNode))
              end || Node <- Nodes]
         end || I <- lists:seq(1, 5)],
        ok
    after
        stop_peers(Peers)
    end.

%% One peer is disconnected (global then disconnects the others from it,
%% or from this node): the files of the nodes that still run are fetched
%% all the same, once connected again.
disconnection_keeps_remote_files(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "disconnected"),
    ok = filelib:ensure_path(Dir),
    %% Peers controlled through their standard io, so that they outlive
    %% the loss of the distribution connection.
    Paths = lists:append([["-pa", filename:dirname(code:which(M))] || M <- [?MODULE, tracekit]]),
    Peers = [begin
                 {ok, P, N} = peer:start_link(#{name => peer:random_name(?MODULE), args => Paths,
                                                connection => standard_io}),
                 pong = net_adm:ping(N),
                 {P, N}
             end || _ <- [1, 2]],
    [{_, A}, {_, B}] = Peers,
    Nodes = [node(), A, B],
    try
        pong = erpc:call(A, net_adm, ping, [B]),
        {T, Tickers} = ticks_everywhere(Nodes, 300, #{file => Dir}),
        wait_dead(Tickers),
        timer:sleep(200),
        true = net_kernel:disconnect(A),
        timer:sleep(500),
        {ok, #{files := Files, nodes := PerNode}} = tracekit:stop(T),
        ct:log("~p~n~p", [Files, PerNode]),
        %% Every node's events shown (in the files) or counted as dropped.
        [?assertEqual(300, maps:get(shown, maps:get(N, PerNode))
                      + maps:get(dropped, maps:get(N, PerNode))) || N <- Nodes],
        %% The files are those of the nodes whose events are shown: this
        %% node's and B's always, A's once it is connected again. (global
        %% can keep A away longer than the tries, as it did once in a VM
        %% under AddressSanitizer: A's events are then counted as dropped,
        %% its file left on A for a while.)
        Shown = [N || N <- Nodes, maps:get(shown, maps:get(N, PerNode)) > 0],
        ?assertEqual(lists:sort([filename:join(Dir, atom_to_list(N) ++ ".tkt") || N <- Shown]),
                     Files),
        ?assertEqual([], [node(), B] -- Shown),
        _ = [ct:comment("~w's file was not fetched: counted as dropped", [A])
             || not lists:member(A, Shown)],
        {ok, Events} = tracekit_file:read(Files),
        [?assertEqual(lists:seq(1, 300), [I || {trace_ts, P1, call, {_, tick, [I]}, _} <- Events,
                                               P1 =:= P])
         || P <- Tickers, lists:member(node(P), Shown)]
    after
        stop_peers(Peers)
    end.

%% A remote node's file is made in a directory of its own that only its
%% user can enter, with a name that cannot be guessed, and goes with it.
remote_files_are_private(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "private"),
    ok = filelib:ensure_path(Dir),
    [{_, Node}] = Peers = peers(1),
    Private = fun() -> erpc:call(Node, filelib, wildcard,
                                 ["/tmp/tracekit-" ++ atom_to_list(Node) ++ "-*"]) end,
    try
        Dirs = [begin
                    {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                             #{nodes => [node(), Node], file => Dir,
                                               print => false}),
                    [D] = Private(),
                    {ok, Info} = erpc:call(Node, file, read_link_info, [D]),
                    ?assertEqual(directory, element(3, Info)),
                    ?assertEqual(8#700, element(8, Info) band 8#777),
                    {ok, _} = tracekit:stop(T),
                    ?assertEqual([], Private()),
                    {ok, Fetched} = file:read_link_info(filename:join(Dir, atom_to_list(Node) ++ ".tkt")),
                    ?assertEqual(0, element(8, Fetched) band 8#077),
                    ok = file:delete(filename:join(Dir, atom_to_list(Node) ++ ".tkt")),
                    ok = file:delete(filename:join(Dir, atom_to_list(node()) ++ ".tkt")),
                    D
                end || _ <- [1, 2]],
        ct:log("~p", [Dirs]),
        ?assertEqual(2, length(lists:usort(Dirs)))
    after
        stop_peers(Peers)
    end.

%% A node stopped (killed) while it wrote a trace file leaves its private
%% directory; once a node of the same name runs tracekit again, it is
%% gone.
stopped_node_leaves_nothing_once_restarted(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "restarted"),
    ok = filelib:ensure_path(Dir),
    Name = peer:random_name(?MODULE),
    Paths = lists:append([["-pa", filename:dirname(code:which(M))] || M <- [?MODULE, tracekit]]),
    {ok, P1, Node} = peer:start(#{name => Name, args => Paths}),
    Left = "/tmp/tracekit-" ++ atom_to_list(Node) ++ "-*",
    {ok, T} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                             #{nodes => [node(), Node], file => Dir, print => false}),
    [_] = filelib:wildcard(Left),
    _ = os:cmd("kill -9 " ++ erpc:call(Node, os, getpid, [])),
    try peer:stop(P1) catch _:_ -> ok end,
    _ = tracekit:stop(T),
    ?assertMatch([_], filelib:wildcard(Left)),
    {ok, P2, Node} = peer:start(#{name => Name, args => Paths}),
    ok = filelib:ensure_path(Dir ++ "2"),
    try
        {ok, T2} = tracekit:calls("tracekit_cluster_SUITE:tick/1",
                                  #{nodes => [node(), Node], file => Dir ++ "2", print => false}),
        %% Only the new trace's directory.
        [New] = filelib:wildcard(Left),
        ?assertNotEqual(nomatch, string:find(New, erpc:call(Node, os, getpid, []))),
        {ok, _} = tracekit:stop(T2),
        ?assertEqual([], filelib:wildcard(Left))
    after
        peer:stop(P2)
    end.

%%% tracekit's own work -----------------------------------------------------------

%% Every function of the modules tracekit uses, traced in every process of
%% two nodes (printed and collected): no event comes from tracekit's own
%% processes on either node, nor from the process that starts and stops
%% the trace.
own_work_is_not_traced(Config) ->
    Io = ?config(io, Config),
    [{_, Node}] = Peers = peers(1),
    try
        [begin
             {ok, T} = tracekit:calls(atom_to_list(M) ++ ":_",
                                      #{nodes => [node(), Node], print => Print, io => Io,
                                        max_events => infinity, max_time => infinity}),
             %% (Asked by another process: this one only starts, waits
             %% and stops, being traced too.)
             Self = self(),
             spawn(fun() -> Self ! {own, erpc:call(Node, tracekit_own, processes, [])
                                          ++ tracekit_own:processes()} end),
             Own = receive {own, O} -> O end,
             receive after 50 -> ok end,
             {ok, Summary} = tracekit:stop(T),
             Pids = case Summary of
                        #{events := Es} -> lists:usort([element(2, E) || E <- Es]);
                        #{} -> lists:usort([P || L <- tk_capture:lines(Io),
                                                 {match, [P]} <- [re:run(L, "^\\S+ [0-9:.]+ (<[0-9.]+>)",
                                                                         [{capture, all_but_first, list}])]])
                    end,
             ct:log("~w (print ~w): ~w; tracekit's ~w", [M, Print, Pids, Own]),
             ?assertEqual([], [P || P <- Pids, lists:member(P, [T, self() | Own])
                                       orelse (is_list(P) andalso
                                               lists:member(P, [pid_to_list(X) || X <- [T, self() | Own],
                                                                                   node(X) =:= node()]))]),
             tk_capture:clear(Io)
         end || M <- [lists, maps, ets, io_lib, gen_server, erpc, timer, proplists, unicode, file],
                Print <- [true, false]],
        ok
    after
        stop_peers(Peers)
    end.

wait_dead(Pids) ->
    [begin
         M = monitor(process, P),
         receive {'DOWN', M, process, P, _} -> ok after 20000 -> ct:fail(not_dead) end
     end || P <- Pids],
    ok.
