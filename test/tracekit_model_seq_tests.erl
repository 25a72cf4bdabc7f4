%% EUnit tests of the seq_* functions of tracekit_model: the reference
%% values through the NIF layer (terms in, terms out), the VM's badargs,
%% and the errors for misuse of the model.
-module(tracekit_model_seq_tests).

-include_lib("eunit/include/eunit.hrl").

-define(M, tracekit_model).

world(Tracer, Names) ->
    W = ?M:seq_new(Tracer),
    [ok = ?M:seq_add(W, N) || N <- Names],
    W.

%% seq_trace_SUITE token_set_get, with terms.
token_set_get_test() ->
    W = world(none, [self]),
    ?assertEqual([], ?M:seq_get_token(W, self)),
    ?assertEqual(0, ?M:seq_set_token(W, self, label, 17)),
    [?assertEqual(false, ?M:seq_set_token(W, self, F, true))
     || F <- [send, 'receive', print, timestamp]],
    ?assertEqual({15, 17, 0, self, 0}, ?M:seq_get_token(W, self)),
    ?assertEqual({0, 0}, ?M:seq_set_token(W, self, serial, {3, 5})),
    ?assertEqual({15, 17, 5, self, 3}, ?M:seq_get_token(W, self)),
    ?assertEqual({serial, {3, 5}}, ?M:seq_get_token(W, self, serial)),
    ?assertEqual({label, 17}, ?M:seq_get_token(W, self, label)),
    ?assertEqual({print, true}, ?M:seq_get_token(W, self, print)),
    ?assertEqual({5, 3}, ?M:seq_counters(W, self)).

labels_are_terms_test() ->
    W = world(accept, [a]),
    ?assertEqual(0, ?M:seq_set_token(W, a, label, {any, "term"})),
    ?assertEqual({any, "term"}, ?M:seq_set_token(W, a, label, 1.0)),
    _ = ?M:seq_set_token(W, a, print, true),
    ok = ?M:seq_print(W, a, 1, integer_label), % 1 =/= 1.0: no event
    ok = ?M:seq_print(W, a, 1.0, float_label),
    ?assertEqual([{seq_trace, 1.0, {print, {0, 1}, a, [], float_label}}],
                 ?M:seq_events(W)),
    ?assertEqual([], ?M:seq_events(W)). % drained

vm_badargs_test() ->
    W = world(none, [a]),
    ?assertError(badarg, ?M:seq_set_token(W, a, serial, {1 bsl 60, 0})),
    ?assertError(badarg, ?M:seq_set_token(W, a, serial, {1 bsl 64, 0})),
    ?assertError(badarg, ?M:seq_set_token(W, a, serial, {1, 2, 3})),
    ?assertError(badarg, ?M:seq_set_token(W, a, send, 'maybe')),
    ?assertError(badarg, ?M:seq_set_token(W, a, spawn, true)),
    ?assertError(badarg, ?M:seq_set_token(W, a, 42, true)),
    ?assertEqual([], ?M:seq_get_token(W, a)), % none of these made a token
    ?assertEqual({spawn, false}, ?M:seq_get_token(W, a, spawn)),
    ?assertError(badarg, ?M:seq_get_token(W, a, bogus)),
    ?assertError(badarg, ?M:seq_print(W, a, an_atom, info)),
    _ = ?M:seq_set_token(W, a, label, 1),
    ?assertError(badarg, ?M:seq_get_token(W, a, spawn)),
    %% set_token/1: the label is set before the serial is refused.
    ?assertError(badarg, ?M:seq_set_token(W, a, {1, 9, 1 bsl 64, a, 0})),
    ?assertEqual({label, 9}, ?M:seq_get_token(W, a, label)),
    ?assertError(badarith, ?M:seq_set_token(W, a, {x, 9, 0, a, 0})),
    ?assertError(function_clause, ?M:seq_set_token(W, a, not_a_token)),
    ?assertEqual({0, 9, 0, a, 0}, ?M:seq_set_token(W, a, [])),
    ?assertEqual(ok, ?M:seq_set_token(W, a, {-1, 9, 4, whoever, 2})),
    ?assertEqual({63, 9, 4, a, 2}, ?M:seq_get_token(W, a)),
    ?assertEqual({63, 9, 4, a, 2},
                 ?M:seq_set_token(W, a, sequential_trace_token, [])).

%% The exit trace of seq_trace_SUITE, and the spawn serials.
exit_and_spawn_test() ->
    W = world(accept, [self]),
    ok = ?M:seq_spawn(W, self, r, true),
    _ = ?M:seq_set_token(W, self, send, true),
    Ref = ?M:seq_send(W, self, r, {before, exit}),
    ?assertEqual({before, exit}, ?M:seq_receive(W, r, Ref)),
    ok = ?M:seq_exit(W, r, {exit, {before, exit}}),
    ?assertMatch([{_, {'EXIT', r, {exit, {before, exit}}}}], ?M:seq_queue(W, self)),
    ?assertEqual([{seq_trace, 0, {send, {0, 1}, self, r, {before, exit}}},
                  {seq_trace, 0, {send, {1, 2}, r, self,
                                  {'EXIT', r, {exit, {before, exit}}}}}],
                 ?M:seq_events(W)),
    ?assertEqual(none, ?M:seq_send(W, self, r, to_the_dead)),
    W2 = world(accept, [p]),
    _ = ?M:seq_set_token(W2, p, send, true),
    _ = ?M:seq_set_token(W2, p, 'receive', true),
    ok = ?M:seq_spawn(W2, p, c, false),
    _ = ?M:seq_send(W2, c, p, hello),
    ?assertEqual([{seq_trace, 0, {send, {0, 1}, p, c, {spawn_request, c}}},
                  {seq_trace, 0, {'receive', {0, 1}, p, c, {spawn_request, c}}},
                  {seq_trace, 0, {send, {1, 2}, c, p, {spawn_reply, c}}},
                  {seq_trace, 0, {'receive', {1, 2}, c, p, {spawn_reply, c}}},
                  {seq_trace, 0, {send, {1, 3}, c, p, hello}}],
                 ?M:seq_events(W2)),
    ?assertEqual({47, 47}, ?M:seq_counters(W2, p)).

timestamps_test() ->
    W = world(accept, [a]),
    _ = ?M:seq_set_token(W, a, print, true),
    _ = ?M:seq_set_token(W, a, monotonic_timestamp, true),
    ok = ?M:seq_print(W, a, one),
    _ = ?M:seq_set_token(W, a, strict_monotonic_timestamp, true),
    ok = ?M:seq_print(W, a, two),
    _ = ?M:seq_set_token(W, a, timestamp, true),
    ok = ?M:seq_print(W, a, three),
    ?assertEqual([monotonic_timestamp, strict_monotonic_timestamp, timestamp],
                 [Ts || {seq_trace, 0, _, Ts} <- ?M:seq_events(W)]).

untokened_and_reset_test() ->
    W = world(refuse, [a, b]),
    _ = ?M:seq_set_token(W, a, send, true),
    R1 = ?M:seq_send(W, a, b, m1),
    ?assertEqual({1, 0, 0, a, 0}, ?M:seq_get_token(W, a)), % refused: no advance
    R2 = ?M:seq_deliver(W, b, timer_message),
    _ = ?M:seq_set_token(W, b, label, 5),
    timer_message = ?M:seq_receive(W, b, R2),
    ?assertEqual({label, 5}, ?M:seq_get_token(W, b, label)),
    true = ?M:seq_reset(W),
    _ = ?M:seq_set_token(W, b, label, 6),
    m1 = ?M:seq_receive(W, b, R1), % its token was cleared by the reset
    ?assertEqual([], ?M:seq_get_token(W, b)).

misuse_test() ->
    W = world(none, [a]),
    ?assertError({no_process, b}, ?M:seq_get_token(W, b)),
    ?assertError({already_exists, a}, ?M:seq_add(W, a)),
    ?assertError({no_message, 99}, ?M:seq_receive(W, a, 99)),
    ok = ?M:seq_spawn(W, a, c, true),
    ?assertError({already_exists, c}, ?M:seq_spawn(W, a, c, false)),
    ok = ?M:seq_exit(W, c, normal),
    ?assertError({dead_process, c}, ?M:seq_get_token(W, c)),
    ?assertError(badarg, ?M:seq_new(maybe_not)),
    ?assertError(badarg, ?M:seq_get_token(not_a_world, a)).

send_untokened_test() ->
    Self = self(),
    _ = seq_trace:set_token(label, 3),
    Before = seq_trace:get_token(),
    ok = ?M:seq_send_untokened(Self, hi),
    receive hi -> ok end,
    After = seq_trace:get_token(),
    _ = seq_trace:set_token([]),
    ?assertEqual(Before, After),
    Dead = spawn(fun() -> ok end),
    Ref = monitor(process, Dead),
    receive {'DOWN', Ref, _, _, _} -> ok end,
    ?assertEqual(false, ?M:seq_send_untokened(Dead, hi)).

order_events_test() ->
    %% {Kind, Label, LastCnt, Serial, From, To, Msg, SpawnReply}
    In = [{'receive', 0, 0, 1, 0, 1, 0, false},
          {send, 0, 0, 1, 0, 1, 0, false},
          {print, 0, 1, 2, 1, -1, 1, false}],
    ?assertEqual([{1, 0}, {0, 1}, {2, -1}], tracekit_seq:seq_order(In)),
    ?assertEqual([], tracekit_seq:seq_order([])),
    ?assertError(badarg, tracekit_seq:seq_order([{bogus}])).
