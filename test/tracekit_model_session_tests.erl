%% EUnit tests of the session model's NIF layer: arguments, answer terms,
%% errors. (What the answers must be is the VM's call: see
%% tracekit_session_prop_SUITE.)
-module(tracekit_model_session_tests).

-include_lib("eunit/include/eunit.hrl").

-define(M, tracekit_model).

new() ->
    ?M:session_new(list_to_integer(erlang:system_info(otp_release))).

not_a_model_test() ->
    ?assertError(badarg, ?M:session_new(not_a_release)),
    ?assertError(badarg, ?M:session_create(make_ref(), a, 1, true)),
    ?assertError(badarg, ?M:session_info(self(), 1, new, flags)).

create_and_session_info_test() ->
    M = new(),
    ?assertEqual({1, 0}, ?M:session_create(M, a, 1, true)),
    ?assertEqual(badarg, ?M:session_create(M, b, 1, false)),
    ?assertEqual({2, 1}, ?M:session_create(M, a, 2, true)),
    ?assertEqual([{a, 0}, {a, 1}, {legacy, default}],
                 ?M:session_session_info(M, all)),
    ?assertEqual(?M:session_session_info(M, all),
                 ?M:session_session_info(M, any)),
    ?assertEqual(badarg, ?M:session_session_info(M, existing)),
    ?assertEqual(true, ?M:session_destroy(M, 1, false)),
    ?assertEqual(false, ?M:session_destroy(M, 1, false)),
    ?assertEqual(badarg, ?M:session_destroy(M, 1, true)),
    ?assertEqual([{a, 1}, {legacy, default}], ?M:session_session_info(M, send)).

flags_test() ->
    M = new(),
    {S, _} = ?M:session_create(M, a, 7, true),
    P = ?M:session_spawn(M, none, false),
    ?assertMatch({tracee, _}, P),
    ?assertEqual(1, ?M:session_process(M, S, P, true,
                                       [timestamp, send, 'receive', procs], 0)),
    %% The VM's order of trace:info(S, P, flags).
    ?assertEqual({flags, [procs, 'receive', send, timestamp]},
                 ?M:session_info(M, S, P, flags)),
    ?assertEqual({tracer, {tracer, 7}}, ?M:session_info(M, S, P, tracer)),
    ?assertEqual(16#10 bor 16#20 bor 16#800 bor 1, ?M:session_union(M, P)),
    %% Flag lists the VM rejects.
    ?assertEqual(badarg, ?M:session_process(M, S, P, true, [send | x], 0)),
    ?assertEqual(badarg, ?M:session_process(M, S, P, true, [{tracer, self()}], 0)),
    ?assertEqual(badarg, ?M:session_process(M, S, P, true, ["send"], 0)),
    ?assertEqual(badarg, ?M:session_process(M, S, P, maybe_not, [send], 0)),
    %% existing: the VM's process count when processes are visited.
    ?assertEqual(42, ?M:session_process(M, S, existing, false, [send], 42)),
    ?assertEqual(0, ?M:session_process(M, S, existing_processes, false,
                                       [ports], 42)),
    ?assertEqual(badarg, ?M:session_process(M, S, existing_ports, false,
                                            [send], 42)),
    ok = ?M:session_exit(M, P),
    ?assertEqual(undefined, ?M:session_info(M, S, P, flags)),
    ?assertEqual(undefined, ?M:session_union(M, P)),
    ?assertEqual(undefined, ?M:session_session_info(M, P)),
    ?assertEqual(badarg, ?M:session_exit(M, P)).

function_test() ->
    M = new(),
    {S, _} = ?M:session_create(M, a, 3, true),
    F = ?M:session_add_function(M, {m, f, 1}, true),
    _ = ?M:session_add_function(M, {m, g, 0}, false),
    ?assertEqual(2, ?M:session_function(M, S, {m, '_', '_'}, {ms, 9},
                                        [local, call_count])),
    ?assertEqual(1, ?M:session_function(M, S, {m, '_', '_'}, true, [global])),
    ?assertEqual(badarg, ?M:session_function(M, S, {m, '_', 1}, true, [])),
    ?assertEqual(badarg, ?M:session_function(M, S, {m, f, 1}, {ms, 0}, [])),
    ?assertEqual(badarg, ?M:session_function(M, S, {m, f, 1}, true,
                                             [{meta, self()}])),
    ?assertEqual(0, ?M:session_function(M, S, on_load, true, [meta])),
    ?assertEqual({traced, global}, ?M:session_info(M, S, {m, f, 1}, traced)),
    ?assertEqual({meta, {tracer, 3}}, ?M:session_info(M, S, on_load, meta)),
    ?assertEqual(1, ?M:session_function(M, S, {m, f, 1}, {ms, 9}, [meta])),
    ok = ?M:session_call(M, F),
    ?assertEqual({all, [{traced, false}, {match_spec, false},
                        {meta, {tracer, 3}}, {meta_match_spec, {ms, 9}},
                        {call_memory, false}, {call_time, false},
                        {call_count, false}]},
                 ?M:session_info(M, S, {m, f, 1}, all)),
    ?assertEqual({call_count, undefined},
                 ?M:session_info(M, S, {m, nope, 1}, call_count)),
    ?assertEqual(badarg, ?M:session_info(M, S, {m, f, '_'}, traced)),
    ?assertEqual(1, ?M:session_send(M, S, {ms, 4}, [])),
    ?assertEqual({match_spec, {ms, 4}}, ?M:session_info(M, S, send, match_spec)),
    ?assertEqual(badarg, ?M:session_recv(M, S, pause, [])),
    ?assertEqual([{a, 0}], ?M:session_session_info(M, {m, f, 1})),
    ?assertEqual(undefined, ?M:session_session_info(M, {m, nope, 1})).

limit_test() ->
    M = new(),
    [?M:session_create(M, a, 1, true) || _ <- lists:seq(1, 31)],
    ?assertError(model_limit, ?M:session_create(M, a, 1, true)).
