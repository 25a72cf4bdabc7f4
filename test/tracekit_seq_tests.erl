%% EUnit tests of tracekit_seq: order/1 and diagram/2 on hand-made events
%% (processes named by atoms, so the output is known exactly), follow/2's
%% options and its restoring of the system tracer and token.
-module(tracekit_seq_tests).

-include_lib("eunit/include/eunit.hrl").

ev(Kind, Serial, From, To, Msg) ->
    {seq_trace, 7, {Kind, Serial, From, To, Msg}}.

%% A client asks a server, which asks a database, prints, and replies.
flow() ->
    [ev(send, {0, 1}, client, server, {req, 1}),
     ev('receive', {0, 1}, client, server, {req, 1}),
     ev(send, {1, 2}, server, db, query),
     ev('receive', {1, 2}, server, db, query),
     ev(send, {2, 3}, db, server, {rows, []}),
     ev('receive', {2, 3}, db, server, {rows, []}),
     {seq_trace, 7, {print, {3, 4}, server, [], "done"}},
     ev(send, {3, 5}, server, client, {reply, ok}),
     ev('receive', {3, 5}, server, client, {reply, ok})].

shuffle(L) ->
    rand:seed(exsss, {1, 2, 3}),
    [X || {_, X} <- lists:sort([{rand:uniform(), X} || X <- L])].

order_restores_the_flow_test() ->
    Flow = flow(),
    Steps = tracekit_seq:order(shuffle(Flow)),
    ?assertEqual(Flow, [maps:get(event, S) || S <- Steps]),
    ?assertEqual([2, 1, 4, 3, 6, 5, none, 9, 8],
                 [maps:get(match, S) || S <- Steps]),
    [First | _] = Steps,
    ?assertEqual(#{event => hd(Flow), kind => send, label => 7,
                   serial => {0, 1}, from => client, to => server,
                   msg => {req, 1}, match => 2}, First).

order_reversed_input_test() ->
    ?assertEqual(flow(), [maps:get(event, S)
                          || S <- tracekit_seq:order(lists:reverse(flow()))]).

%% Two nodes' logs, each in its own order, concatenated: a process on node
%% A (a1) sends to b1 on node B, which replies; the old message a1 gets
%% later (serial 2 from a2) is placed after a1's send of 5, by the LastCnt
%% of a1's next send.
order_merged_logs_test() ->
    LogA = [ev(send, {0, 5}, a1, b1, ping),
            ev(send, {0, 2}, a2, a1, old),
            ev('receive', {0, 2}, a2, a1, old),
            ev(send, {2, 6}, a1, a2, after_old),
            ev('receive', {5, 6}, b1, a1, pong)],
    LogB = [ev('receive', {0, 5}, a1, b1, ping),
            ev(send, {5, 6}, b1, a1, pong)],
    Got = [maps:get(event, S) || S <- tracekit_seq:order(LogB ++ LogA)],
    Pos = fun(E) -> string:str(Got, [E]) end,
    [Ping, Old, OldRecv, AfterOld, PongRecv] = LogA,
    [PingRecv, Pong] = LogB,
    ?assert(Pos(Ping) < Pos(PingRecv)),
    ?assert(Pos(PingRecv) < Pos(Pong)),
    ?assert(Pos(Pong) < Pos(PongRecv)),
    ?assert(Pos(Old) < Pos(OldRecv)),
    ?assert(Pos(Ping) < Pos(OldRecv)),
    ?assert(Pos(OldRecv) < Pos(AfterOld)),
    ?assertEqual(7, length(Got)).

%% The parent's first send after a spawn carries LastCnt 16 * s + 15, the
%% spawn_reply's serial s as a machine word: it still follows the reply.
order_spawn_reply_test() ->
    Req = {spawn_request, make_ref(), parent, gl, {m, f, 0}, [], spawn_reply, []},
    Rep = {spawn_reply, make_ref(), ok, child},
    Events = [ev(send, {0, 1}, parent, child, Req),
              ev('receive', {0, 1}, parent, child, Req),
              ev(send, {1, 2}, child, parent, Rep),
              ev('receive', {1, 2}, child, parent, Rep),
              ev(send, {47, 48}, parent, child, next)],
    ?assertEqual(Events, [maps:get(event, S)
                          || S <- tracekit_seq:order(lists:reverse(Events))]).

order_keeps_timestamps_test() ->
    E = {seq_trace, 1, {print, {0, 1}, p, [], hi}, {1, 2, 3}},
    ?assertMatch([#{ts := {1, 2, 3}, kind := print, match := none}],
                 tracekit_seq:order([E])).

order_badarg_test() ->
    ?assertError({badarg, {not_a_seq_trace_event, foo}},
                 tracekit_seq:order([foo])),
    ?assertError({badarg, _}, tracekit_seq:order([{seq_trace, 1, {x, y}}])),
    ?assertError(badarg, tracekit_seq:order(not_a_list)),
    ?assertEqual([], tracekit_seq:order([])).

mermaid_test() ->
    Expected =
        "sequenceDiagram\n"
        "    participant p1 as client\n"
        "    participant p2 as server\n"
        "    participant p3 as db\n"
        "    p1->>p2: {req,1}\n"
        "    p2->>p3: query\n"
        "    p3->>p2: {rows,[]}\n"
        "    Note over p2: #34;done#34;\n"
        "    p2->>p1: {reply,ok}\n",
    ?assertEqual(Expected, flat(tracekit_seq:diagram(shuffle(flow()), mermaid))).

mermaid_escapes_and_lost_messages_test() ->
    Events = [ev(send, {0, 1}, a, b, {'a;b', "#", <<"<x>">>})],
    ?assertEqual("sequenceDiagram\n"
                 "    participant p1 as a\n"
                 "    participant p2 as b\n"
                 "    p1-xp2: {'a#59;b',#34;#35;#34;,#60;#60;#34;#60;x#62;#34;#62;#62;}\n",
                 flat(tracekit_seq:diagram(Events, mermaid))).

text_test() ->
    Expected =
        "     client          server            db\n"
        "        |               |               |\n"
        "        |--{req,1}----->|               |\n"
        "        |               |--query------->|\n"
        "        |               |<-{rows,[]}----|\n"
        "        |               * \"done\"        |\n"
        "        |<-{reply,ok}---|               |\n",
    ?assertEqual(Expected, flat(tracekit_seq:diagram(flow(), text))).

text_long_and_self_messages_test() ->
    Long = lists:duplicate(60, $x),
    Events = [ev(send, {0, 1}, a, b, list_to_atom(Long)),
              ev(send, {0, 2}, b, b, self_note),
              ev('receive', {0, 2}, b, b, self_note)],
    Text = flat(tracekit_seq:diagram(Events, text)),
    [Header, Life, Row1, Row2] = string:split(Text, "\n", all) -- [""],
    %% Columns 30 wide (the most for long messages); the unreceived send
    %% ends in x; the self message loops back on b.
    ?assertEqual("               a                             b", Header),
    ?assertEqual("               |                             |", Life),
    ?assertEqual("               |--xxxxxxxxxxxxxxxxxxxxxx...-x|", Row1),
    ?assertEqual("               |                             |<-'self_note",
                 Row2).

diagram_takes_ordered_steps_test() ->
    Steps = tracekit_seq:order(flow()),
    ?assertEqual(flat(tracekit_seq:diagram(flow(), mermaid)),
                 flat(tracekit_seq:diagram(Steps, mermaid))).

diagram_badarg_test() ->
    ?assertError(badarg, tracekit_seq:diagram(flow(), svg)),
    ?assertEqual("sequenceDiagram\n", flat(tracekit_seq:diagram([], mermaid))).

registered_names_test() ->
    Self = self(),
    P = spawn(fun() -> receive stop -> ok end end),
    true = register(tracekit_seq_tests_proc, P),
    Events = [ev(send, {0, 1}, Self, P, hi)],
    Text = flat(tracekit_seq:diagram(Events, mermaid)),
    P ! stop,
    ?assertEqual("sequenceDiagram\n"
                 "    participant p1 as " ++ escaped_pid(Self) ++ "\n"
                 "    participant p2 as tracekit_seq_tests_proc\n"
                 "    p1-xp2: hi\n", Text).

escaped_pid(Pid) ->
    "#60;" ++ string:trim(pid_to_list(Pid), both, "<>") ++ "#62;".

%% follow/2 with OTP's process tracer: the events of the flow, the system
%% tracer and the caller's token as they were.
follow_test() ->
    Old = seq_trace:get_system_tracer(),
    Echo = spawn(fun() -> receive {From, M} -> From ! {echo, M} end end),
    _ = seq_trace:set_token(label, old_label),
    {Reply, Events} =
        tracekit_seq:follow(fun() ->
                                    Echo ! {self(), hi},
                                    receive {echo, R} -> R end
                            end,
                            #{tracer => process, settle => 0, label => lbl,
                              flags => [send, 'receive']}),
    Token = seq_trace:get_token(),
    _ = seq_trace:set_token([]),
    Self = self(),
    ?assertEqual(hi, Reply),
    ?assertEqual([{seq_trace, lbl, {send, {0, 1}, Self, Echo, {Self, hi}}},
                  {seq_trace, lbl, {'receive', {0, 1}, Self, Echo, {Self, hi}}},
                  {seq_trace, lbl, {send, {1, 2}, Echo, Self, {echo, hi}}},
                  {seq_trace, lbl, {'receive', {1, 2}, Echo, Self, {echo, hi}}}],
                 Events),
    ?assertEqual(Old, seq_trace:get_system_tracer()),
    ?assertMatch({0, old_label, 0, Self, _}, Token).

follow_raises_after_restoring_test() ->
    Old = seq_trace:get_system_tracer(),
    ?assertError(boom, tracekit_seq:follow(fun() -> error(boom) end,
                                           #{tracer => process, settle => 0})),
    ?assertEqual(Old, seq_trace:get_system_tracer()),
    ?assertEqual([], seq_trace:get_token()).

follow_options_test() ->
    F = fun() -> ok end,
    ?assertError({badarg, {flags, [bogus]}},
                 tracekit_seq:follow(F, #{flags => [bogus]})),
    ?assertError({badarg, {settle, -1}}, tracekit_seq:follow(F, #{settle => -1})),
    ?assertError({badarg, {tracer, none}}, tracekit_seq:follow(F, #{tracer => none})),
    ?assertError({badarg, {unknown_options, [colour]}},
                 tracekit_seq:follow(F, #{colour => red})),
    ?assertError(badarg, tracekit_seq:follow(not_a_fun, #{})).

flat(IoData) ->
    unicode:characters_to_list(IoData).
