%% tracekit_seq on real flows: a request/reply flow through three
%% processes of this node, a flow that spawns a linked worker, and a flow
%% across two nodes (the second one started with OTP's peer), each
%% followed with tracekit_seq:follow/2, put in order and drawn; the ordered
%% result and the diagram texts are checked exactly.
-module(tracekit_seq_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_testcase/2, end_per_testcase/2]).
-export([request_reply/1, request_reply_process_tracer/1, spawn_worker/1,
         two_nodes/1, restores_system_tracer/1]).
%% Run on the peer node.
-export([remote_server/1, remote_tracer/0]).

all() ->
    [request_reply, request_reply_process_tracer, spawn_worker,
     restores_system_tracer, two_nodes].

init_per_testcase(_, Config) ->
    Config.

end_per_testcase(_, _Config) ->
    [exit(P, kill) || N <- [tk_seq_server, tk_seq_db], P <- [whereis(N)],
                      is_pid(P)],
    [unregister(tk_seq_client) || whereis(tk_seq_client) =/= undefined],
    _ = seq_trace:set_token([]),
    ok.

%%% ---- the flow -------------------------------------------------------------

%% The client asks the server, which queries the database, prints and
%% replies. Registered names only: no pid in any message.
db() ->
    receive
        {query, N, ReplyTo} -> ReplyTo ! {rows, [N]}, db()
    end.

server(Db) ->
    receive
        {get, N, ReplyTo} ->
            Db ! {query, N, {tk_seq_server, node()}},
            Rows = receive {rows, R} -> R after 5000 -> timeout end,
            seq_trace:print(answered),
            ReplyTo ! {reply, Rows},
            server(Db)
    end.

start_flow_processes() ->
    Db = spawn(fun db/0),
    true = register(tk_seq_db, Db),
    Server = spawn(fun() -> server({tk_seq_db, node()}) end),
    true = register(tk_seq_server, Server),
    true = register(tk_seq_client, self()),
    {Server, Db}.

ask(Server) ->
    fun() ->
            Server ! {get, 1, {tk_seq_client, node()}},
            receive {reply, Rows} -> Rows after 5000 -> timeout end
    end.

%% The ordered flow as {Kind, Serial, From, To, Msg}.
summary(Steps) ->
    [{K, S, F, T, M} || #{kind := K, serial := S, from := F, to := T, msg := M}
                            <- Steps].

%%% ---- test cases --------------------------------------------------------

request_reply(_Config) ->
    check_request_reply(#{}).

request_reply_process_tracer(_Config) ->
    check_request_reply(#{tracer => process}).

check_request_reply(Opts) ->
    {Server, Db} = start_flow_processes(),
    C = self(),
    Node = node(),
    {Rows, Events} = tracekit_seq:follow(ask(Server), Opts#{settle => 20}),
    ?assertEqual([1], Rows),
    Expected =
        [{send, {0, 1}, C, Server, {get, 1, {tk_seq_client, Node}}},
         {'receive', {0, 1}, C, Server, {get, 1, {tk_seq_client, Node}}},
         {send, {1, 2}, Server, Db, {query, 1, {tk_seq_server, Node}}},
         {'receive', {1, 2}, Server, Db, {query, 1, {tk_seq_server, Node}}},
         {send, {2, 3}, Db, Server, {rows, [1]}},
         {'receive', {2, 3}, Db, Server, {rows, [1]}},
         {print, {3, 4}, Server, [], answered},
         {send, {3, 5}, Server, C, {reply, [1]}},
         {'receive', {3, 5}, Server, C, {reply, [1]}}],
    Ordered = tracekit_seq:order(Events),
    ?assertEqual(Expected, summary(Ordered)),
    ?assertEqual([2, 1, 4, 3, 6, 5, none, 9, 8],
                 [maps:get(match, S) || S <- Ordered]),
    %% Any input order gives the same result.
    ?assertEqual(Ordered, tracekit_seq:order(lists:reverse(Events))),
    NodeText = lists:flatten(io_lib:format("~0tp", [Node])),
    ?assertEqual(
       "sequenceDiagram\n"
       "    participant p1 as tk_seq_client\n"
       "    participant p2 as tk_seq_server\n"
       "    participant p3 as tk_seq_db\n"
       "    p1->>p2: " ++ short("{get,1,{tk_seq_client," ++ NodeText ++ "}}") ++ "\n"
       "    p2->>p3: " ++ short("{query,1,{tk_seq_server," ++ NodeText ++ "}}") ++ "\n"
       "    p3->>p2: {rows,[1]}\n"
       "    Note over p2: answered\n"
       "    p2->>p1: {reply,[1]}\n",
       flat(tracekit_seq:diagram(Events, mermaid))),
    Text = flat(tracekit_seq:diagram(Events, text)),
    ct:log("~ts", [Text]),
    %% Columns 30 wide (the widest, for messages longer than 24
    %% characters); messages cut to the room between two lifelines.
    ?assertEqual(
       ["         tk_seq_client                 tk_seq_server                   tk_seq_db",
        "               |                             |                             |",
        "               |--{get,1,{tk_seq_client,...->|                             |",
        "               |                             |--{query,1,{tk_seq_serve...->|",
        "               |                             |<-{rows,[1]}-----------------|",
        "               |                             * answered                    |",
        "               |<-{reply,[1]}----------------|                             |"],
       string:split(string:trim(Text, trailing, "\n"), "\n", all)).

%% The server spawns a linked worker for each request; the worker answers
%% and ends; the server (trapping exits) receives its 'EXIT'.
spawn_worker(_Config) ->
    Server = spawn(fun() ->
                           process_flag(trap_exit, true),
                           From = receive {go, F} -> F after 5000 -> exit(timeout) end,
                           W = spawn_link(fun() -> From ! {done, self()} end),
                           receive {'EXIT', W, normal} -> ok after 5000 -> exit(timeout) end,
                           From ! exited
                   end),
    C = self(),
    {W, Events} = tracekit_seq:follow(
                    fun() ->
                            Server ! {go, C},
                            Worker = receive {done, Wk} -> Wk after 5000 -> timeout end,
                            receive exited -> Worker after 5000 -> timeout end
                    end, #{settle => 20}),
    Expected =
        [{send, {0, 1}, C, Server, {go, C}},
         {'receive', {0, 1}, C, Server, {go, C}},
         {send, {1, 2}, Server, W, spawn_request},
         {'receive', {1, 2}, Server, W, spawn_request},
         {send, {2, 3}, W, Server, spawn_reply},
         {'receive', {2, 3}, W, Server, spawn_reply},
         {send, {2, 4}, W, C, {done, W}},
         {'receive', {2, 4}, W, C, {done, W}},
         {send, {2, 5}, W, Server, {'EXIT', W, normal}},
         {'receive', {2, 5}, W, Server, {'EXIT', W, normal}},
         %% The spawn_reply set the server's clock to 16 * 3 + 15 = 63 (the
         %% VM's quirk), the 'EXIT' its lastcnt to 5.
         {send, {5, 64}, Server, C, exited},
         {'receive', {5, 64}, Server, C, exited}],
    Got = [case M of
               {spawn_request, _, _, _, _, _, _, _} -> {K, S, F, T, spawn_request};
               {spawn_reply, _, ok, W} -> {K, S, F, T, spawn_reply};
               _ -> E
           end || {K, S, F, T, M} = E <- summary(tracekit_seq:order(Events))],
    ?assertEqual(Expected, Got),
    P = fun(Pid) -> "#60;" ++ string:trim(pid_to_list(Pid), both, "<>") ++ "#62;" end,
    ?assertEqual(
       "sequenceDiagram\n"
       "    participant p1 as " ++ P(C) ++ "\n"
       "    participant p2 as " ++ P(Server) ++ "\n"
       "    participant p3 as " ++ P(W) ++ "\n"
       "    p1->>p2: {go," ++ P(C) ++ "}\n"
       "    p2->>p3: spawn_request\n"
       "    p3->>p2: spawn_reply\n"
       "    p3->>p1: {done," ++ P(W) ++ "}\n"
       "    p3->>p2: {'EXIT'," ++ P(W) ++ ",normal}\n"
       "    p2->>p1: exited\n",
       flat(tracekit_seq:diagram(Events, mermaid))).

restores_system_tracer(_Config) ->
    Collector = tk_collector:start(),
    _ = seq_trace:set_system_tracer(Collector),
    {ok, []} = tracekit_seq:follow(fun() -> ok end, #{settle => 0}),
    ?assertEqual(Collector, seq_trace:set_system_tracer(false)),
    tk_collector:stop(Collector),
    ok.

%% The client here, the server on a peer node, the database here: the
%% events come from two system tracers (a ring on each node) and are merged
%% in any order.
two_nodes(_Config) ->
    Started = ensure_distributed(),
    Paths = [filename:dirname(code:which(M)) || M <- [tracekit_seq, ?MODULE]],
    {ok, Peer, Node} = peer:start_link(#{name => peer:random_name(tk_seq),
                                         args => lists:append([["-pa", P] || P <- Paths])}),
    try
        Db = spawn(fun db/0),
        true = register(tk_seq_db, Db),
        true = register(tk_seq_client, self()),
        Server = erpc:call(Node, ?MODULE, remote_server, [node()]),
        Tracer = erpc:call(Node, ?MODULE, remote_tracer, []),
        {Rows, Local} = tracekit_seq:follow(ask(Server), #{settle => 50}),
        Tracer ! {drain, self()},
        Remote = receive {remote_events, Es} -> Es after 5000 -> error(no_remote_events) end,
        ?assertEqual([1], Rows),
        C = self(),
        Here = node(),
        Expected =
            [{send, {0, 1}, C, Server, {get, 1, {tk_seq_client, Here}}},
             {'receive', {0, 1}, C, Server, {get, 1, {tk_seq_client, Here}}},
             {send, {1, 2}, Server, {tk_seq_db, Here}, {query, 1, {tk_seq_server, Node}}},
             {'receive', {1, 2}, Server, Db, {query, 1, {tk_seq_server, Node}}},
             {send, {2, 3}, Db, {tk_seq_server, Node}, {rows, [1]}},
             {'receive', {2, 3}, Db, Server, {rows, [1]}},
             {print, {3, 4}, Server, [], answered},
             {send, {3, 5}, Server, {tk_seq_client, Here}, {reply, [1]}},
             {'receive', {3, 5}, Server, C, {reply, [1]}}],
        %% Each node's log in its own order, the remote one first.
        Ordered = tracekit_seq:order(Remote ++ Local),
        ?assertEqual(Expected, summary(Ordered)),
        ?assertEqual([2, 1, 4, 3, 6, 5, none, 9, 8],
                     [maps:get(match, S) || S <- Ordered]),
        %% Whatever the clocks say: with the peer's clock a second behind
        %% (each event stamped by its node's clock, in the wrong order
        %% across nodes), the order is the same.
        Stamp = fun(Es, Base) -> [{seq_trace, L, I, {0, Base, N}}
                                  || {N, {seq_trace, L, I}} <- lists:enumerate(Es)] end,
        Skewed = Stamp(Local, 100) ++ Stamp(Remote, 99),
        ?assertEqual(Expected, summary(tracekit_seq:order(lists:reverse(Skewed)))),
        %% Sends of the client and the database, their receives, here;
        %% the server's receives, sends and print there.
        ?assertEqual({4, 5}, {length(Local), length(Remote)}),
        [NodeName | _] = string:split(atom_to_list(Node), "@"),
        HereText = lists:flatten(io_lib:format("~0tp", [Here])),
        NodeText = lists:flatten(io_lib:format("~0tp", [Node])),
        ?assertEqual(
           "sequenceDiagram\n"
           "    participant p1 as tk_seq_client\n"
           "    participant p2 as tk_seq_server@" ++ NodeName ++ "\n"
           "    participant p3 as tk_seq_db\n"
           "    p1->>p2: " ++ short("{get,1,{tk_seq_client," ++ HereText ++ "}}") ++ "\n"
           "    p2->>p3: " ++ short("{query,1,{tk_seq_server," ++ NodeText ++ "}}") ++ "\n"
           "    p3->>p2: {rows,[1]}\n"
           "    Note over p2: answered\n"
           "    p2->>p1: {reply,[1]}\n",
           flat(tracekit_seq:diagram(Remote ++ Local, mermaid)))
    after
        peer:stop(Peer),
        %% Leave the node as it was for the suites that follow.
        Started andalso net_kernel:stop()
    end.

%% On the peer: the registered server, asking the database of `Home'.
remote_server(Home) ->
    Pid = spawn(fun() -> server({tk_seq_db, Home}) end),
    true = register(tk_seq_server, Pid),
    Pid.

%% On the peer: a ring as system seq tracer, drained on request.
remote_tracer() ->
    Self = self(),
    Ready = make_ref(),
    Pid = spawn(fun() ->
                        {ok, R} = tracekit_ring:new(#{}),
                        _ = seq_trace:set_system_tracer({tracekit_ring, R}),
                        Self ! Ready,
                        receive
                            {drain, From} ->
                                From ! {remote_events, tracekit_ring:drain(R)}
                        end
                end),
    receive Ready -> Pid after 5000 -> error(remote_tracer_timeout) end.

%% Makes this node distributed if it is not; true when it did.
ensure_distributed() ->
    case node() of
        nonode@nohost ->
            Name = list_to_atom("tk_seq_ct_" ++ os:getpid()),
            case net_kernel:start(Name, #{name_domain => shortnames}) of
                {ok, _} ->
                    true;
                {error, _} ->
                    %% No epmd yet: start the one of this OTP, then retry.
                    Epmd = filename:join([code:root_dir(),
                                          "erts-" ++ erlang:system_info(version),
                                          "bin", "epmd"]),
                    _ = os:cmd(Epmd ++ " -daemon"),
                    timer:sleep(500),
                    {ok, _} = net_kernel:start(Name, #{name_domain => shortnames}),
                    true
            end;
        _ ->
            false
    end.

%%% ---- text helpers ------------------------------------------------------

flat(IoData) ->
    unicode:characters_to_list(IoData).

%% Messages are cut to 40 characters in diagrams.
short(S) when length(S) > 40 -> lists:sublist(S, 37) ++ "...";
short(S) -> S.
