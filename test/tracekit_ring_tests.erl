%% Unit tests of tracekit_ring that call the tracer callbacks directly (the
%% calling process plays the traced process), so that encoding, decoding,
%% options and counters are checked without depending on VM scheduling.
-module(tracekit_ring_tests).
%% PropEr's header first: eunit.hrl then leaves PropEr's LET macro alone.
-include_lib("proper/include/proper.hrl").
-include_lib("eunit/include/eunit.hrl").

ring(Opts) ->
    {ok, R} = tracekit_ring:new(Opts),
    R.

%% Records Term as the message of a send event and drains it back.
round_trip(R, Term) ->
    trace = tracekit_ring:enabled_send(send, R, self()),
    ok = tracekit_ring:trace_send(send, R, self(), Term, #{extra => self()}),
    [{trace, Self, send, Back, Self}] = tracekit_ring:drain(R),
    Self = self(),
    Back.

terms() ->
    [a, '', 'ünïcödé', 0, -1, 1 bsl 59 - 1, -(1 bsl 59), 1 bsl 64, -(1 bsl 200),
     1.5, -0.0, 1.0e300, <<>>, <<"binary">>, <<1:7>>, <<0:400000>>,
     [], "string", [1, 2 | 3], [[[]]], {}, {a, {b, {c}}}, #{}, #{a => 1},
     maps:from_list([{I, I} || I <- lists:seq(1, 100)]), self(), make_ref(),
     fun lists:map/2, fun() -> ok end, hd(erlang:ports()),
     list_to_pid("<0.1.0>"), lists:seq(1, 5000),
     {lists:duplicate(50, #{k => <<"v">>})}].

round_trip_every_kind_of_term_test() ->
    R = ring(#{}),
    [?assertEqual(T, round_trip(R, T)) || T <- terms()].

round_trip_property_test() ->
    R = ring(#{}),
    ?assert(proper:quickcheck(?FORALL(T, any(), round_trip(R, T) =:= T),
                              [{numtests, 500}, quiet, {to_file, user}])).

remote_pid_round_trip_test() ->
    %% A pid of another node goes through the external format.
    Remote = binary_to_term(<<131,88,100,0,8,"a@remote",0,0,0,1,0,0,0,0,0,0,0,7>>),
    ?assertEqual(Remote, round_trip(ring(#{}), Remote)).

deep_nesting_is_cut_test() ->
    Deep = lists:foldl(fun(_, Acc) -> {Acc} end, x, lists:seq(1, 1000)),
    Back = round_trip(ring(#{}), Deep),
    ?assert(depth(Back) < 250),
    ?assertEqual('...', innermost(Back)).

depth({X}) -> 1 + depth(X);
depth(_) -> 0.
innermost({X}) -> innermost(X);
innermost(X) -> X.

full_payload_cut_at_64k_test() ->
    Big = lists:seq(1, 100000),
    Back = round_trip(ring(#{}), Big),
    {Kept, '...'} = split_improper(Back),
    ?assert(length(Kept) > 1000),
    ?assertEqual(lists:sublist(Big, length(Kept)), Kept).

split_improper(L) -> split_improper(L, []).
split_improper([H | T], Acc) -> split_improper(T, [H | Acc]);
split_improper(Tail, Acc) -> {lists:reverse(Acc), Tail}.

payload_none_test() ->
    R = ring(#{payload => none}),
    ?assertEqual('...', round_trip(R, {secret, lists:seq(1, 100)})),
    ok = tracekit_ring:trace_call(call, R, self(), {m, f, [1, 2, 3]}, #{}),
    ok = tracekit_ring:trace_call(return_from, R, self(), {m, f, 3}, #{extra => big}),
    ok = tracekit_ring:trace_call(exception_from, R, self(), {m, f, 3},
                                  #{extra => {error, badarg}}),
    ok = tracekit_ring:trace_procs(spawn, R, self(), self(), #{extra => {m, f, [a, b]}}),
    ok = tracekit_ring:trace_procs(register, R, self(), name, #{}),
    ok = tracekit_ring:trace(seq_trace, R, 7, {send, {0, 1}, self(), self(), msg}, #{}),
    Self = self(),
    ?assertEqual([{trace, Self, call, {m, f, 3}},
                  {trace, Self, return_from, {m, f, 3}, '...'},
                  {trace, Self, exception_from, {m, f, 3}, {error, '...'}},
                  {trace, Self, spawn, Self, {m, f, 2}},
                  {trace, Self, register, name},
                  {seq_trace, 7, {send, {0, 1}, Self, Self, '...'}}],
                 tracekit_ring:drain(R)).

payload_max_bytes_test() ->
    R = ring(#{payload => {max_bytes, 64}}),
    ?assertEqual({small, 1}, round_trip(R, {small, 1})),
    %% About 64 bytes of the record format: a list head, 2 or 3 bytes per
    %% small integer (a tag and a varint), the tail.
    {Kept, '...'} = split_improper(round_trip(R, lists:seq(1, 1000))),
    ?assert(length(Kept) > 12 andalso length(Kept) =< 32),
    {'...', Prefix, 100000} = round_trip(R, binary:copy(<<"x">>, 100000)),
    ?assert(byte_size(Prefix) > 20 andalso byte_size(Prefix) =< 64),
    %% Call arguments are cut, the MFA is kept.
    ok = tracekit_ring:trace_call(call, R, self(), {m, f, [lists:seq(1, 100)]}, #{}),
    [{trace, _, call, {m, f, [Arg]}}] = tracekit_ring:drain(R),
    {_, '...'} = split_improper(Arg).

opts_shapes_test() ->
    %% Every optional field lands where the process tracer puts it.
    R = ring(#{}),
    Self = self(),
    Cases = [{#{}, {trace, Self, send, m}},
             {#{extra => x}, {trace, Self, send, m, x}},
             {#{match_spec_result => y}, {trace, Self, send, m, y}},
             {#{scheduler_id => 3}, {trace, Self, send, m, 3}},
             {#{extra => x, match_spec_result => y, scheduler_id => 3},
              {trace, Self, send, m, x, y, 3}}],
    [begin
         ok = tracekit_ring:trace_send(send, R, self(), m, Opts),
         ?assertEqual([Want], tracekit_ring:drain(R))
     end || {Opts, Want} <- Cases],
    [begin
         ok = tracekit_ring:trace_send(send, R, self(), m, #{timestamp => Kind}),
         [Ev] = tracekit_ring:drain(R),
         ?assertEqual(trace_ts, element(1, Ev)),
         ?assert(ts_shape(Kind, element(5, Ev)))
     end || Kind <- [timestamp, cpu_timestamp, monotonic, strict_monotonic]],
    ok = tracekit_ring:trace(seq_trace, R, 1, info, #{timestamp => monotonic}),
    [{seq_trace, 1, info, Ts}] = tracekit_ring:drain(R),
    ?assert(is_integer(Ts)).

ts_shape(K, {A, B, C}) when K =:= timestamp; K =:= cpu_timestamp ->
    is_integer(A) andalso is_integer(B) andalso is_integer(C);
ts_shape(monotonic, T) -> is_integer(T);
ts_shape(strict_monotonic, {M, U}) -> is_integer(M) andalso is_integer(U);
ts_shape(_, _) -> false.

enabled_answers_test() ->
    R = ring(#{tags => [send]}),
    ?assertEqual(trace, tracekit_ring:enabled(trace_status, R, self())),
    ?assertEqual(trace, tracekit_ring:enabled_send(send, R, self())),
    ?assertEqual(discard, tracekit_ring:enabled_receive('receive', R, self())),
    ?assertMatch(#{filtered := 1}, tracekit_ring:stats(R)),
    ok = tracekit_ring:close(R),
    ?assertEqual(remove, tracekit_ring:enabled(trace_status, R, self())),
    ?assertEqual(discard, tracekit_ring:enabled_send(send, R, self())),
    %% Not a ring at all.
    [begin
         ?assertEqual(remove, tracekit_ring:enabled(trace_status, S, self())),
         ?assertEqual(discard, tracekit_ring:enabled_call(call, S, self())),
         ?assertEqual(ok, tracekit_ring:trace_call(call, S, self(), {m, f, []}, #{}))
     end || S <- [foo, 1, make_ref(), self(), <<>>, element(2, tracekit_count:new())]].

closed_ring_keeps_its_events_test() ->
    R = ring(#{}),
    ok = tracekit_ring:trace_send(send, R, self(), before, #{}),
    ok = tracekit_ring:close(R),
    ok = tracekit_ring:trace_send(send, R, self(), 'after', #{}),
    ?assertMatch([{trace, _, send, before}], tracekit_ring:drain(R)),
    ?assertMatch(#{closed := true, written := 1}, tracekit_ring:stats(R)).

drop_counts_exactly_test() ->
    R = ring(#{size => 4096}),
    N = 1000,
    Offered = [case tracekit_ring:enabled_send(send, R, self()) of
                   trace -> tracekit_ring:trace_send(send, R, self(), I, #{}), 1;
                   discard -> 1
               end || I <- lists:seq(1, N)],
    #{written := W, dropped := D} = tracekit_ring:stats(R),
    ?assertEqual(N, lists:sum(Offered)),
    ?assertEqual(N, W + D),
    ?assert(D > 0),
    %% The oldest are kept: 1, 2, 3, ... in order.
    Got = [I || {trace, _, send, I} <- tracekit_ring:drain(R)],
    ?assertEqual(lists:seq(1, W), Got).

overwrite_keeps_newest_test() ->
    R = ring(#{size => 4096, policy => overwrite}),
    N = 1000,
    [begin
         trace = tracekit_ring:enabled_send(send, R, self()),
         ok = tracekit_ring:trace_send(send, R, self(), I, #{})
     end || I <- lists:seq(1, N)],
    #{written := N, overwritten := O, dropped := 0} = tracekit_ring:stats(R),
    Got = [I || {trace, _, send, I} <- tracekit_ring:drain(R)],
    ?assertEqual(lists:seq(O + 1, N), Got).

drain_max_test() ->
    R = ring(#{}),
    [ok = tracekit_ring:trace_send(send, R, self(), I, #{}) || I <- lists:seq(1, 10000)],
    A = tracekit_ring:drain(R, 3),
    B = tracekit_ring:drain(R, 5000),
    C = tracekit_ring:drain(R),
    ?assertEqual(lists:seq(1, 10000), [I || {trace, _, send, I} <- A ++ B ++ C]),
    ?assertEqual({3, 5000}, {length(A), length(B)}),
    ?assertEqual([], tracekit_ring:drain(R)),
    ?assertMatch(#{drained := 10000, buffered := 0}, tracekit_ring:stats(R)).

bad_options_test_() ->
    [?_assertEqual({error, {badopt, O}}, tracekit_ring:new([O]))
     || O <- [{size, 1000}, {size, 2048}, {size, 1 bsl 31}, {size, -1}, {size, x},
              {policy, keep}, {payload, some}, {payload, {max_bytes, 0}},
              {tags, [send, nonsense]}, {tags, []}, {tags, send}, {colour, red},
              not_a_tuple]] ++
    [?_assertEqual({error, {badopt, {payload, {max_bytes, -3}}}},
                   tracekit_ring:new(#{payload => {max_bytes, -3}})),
     ?_assertEqual({error, {badopt, 42}}, tracekit_ring:new(42)),
     ?_assertMatch({ok, _}, tracekit_ring:new([{size, 8192}, {policy, overwrite}]))].

badarg_test_() ->
    [?_assertError(badarg, tracekit_ring:F(X))
     || F <- [drain, stats, close], X <- [undefined, make_ref(), self(), "r"]] ++
    [?_assertError(badarg, tracekit_ring:drain(element(2, tracekit_ring:new()), 0)),
     ?_assertError(badarg, tracekit_ring:drain(element(2, tracekit_ring:new()), x))].

set_paused_and_tags_test() ->
    R = ring(#{}),
    Self = self(),
    ?assertMatch(#{paused := false, sample := 1, tags := all}, tracekit_ring:stats(R)),
    ok = tracekit_ring:set(R, #{paused => true}),
    ?assertEqual(discard, tracekit_ring:enabled_send(send, R, Self)),
    %% trace_* checks again: an event enabled before set/2 is not recorded.
    ok = tracekit_ring:trace_send(send, R, Self, late, #{}),
    ?assertEqual([], tracekit_ring:drain(R)),
    ok = tracekit_ring:set(R, #{paused => false, tags => [call]}),
    ?assertEqual(discard, tracekit_ring:enabled_send(send, R, Self)),
    ?assertEqual(trace, tracekit_ring:enabled_call(call, R, Self)),
    ?assertEqual(trace, tracekit_ring:enabled(trace_status, R, Self)),
    ?assertMatch(#{paused := false, tags := [call], filtered := 3}, tracekit_ring:stats(R)),
    ok = tracekit_ring:set(R, #{tags => all}),
    ?assertEqual(trace, tracekit_ring:enabled_send(send, R, Self)).

set_sample_test() ->
    R = ring(#{}),
    ok = tracekit_ring:set(R, #{sample => 3}),
    Answers = [tracekit_ring:enabled_send(send, R, self()) || _ <- lists:seq(1, 3000)],
    Traced = length([A || A <- Answers, A =:= trace]),
    %% Every third per scheduler thread: 1000, a little less if this
    %% process moved between threads.
    ?assert(Traced =< 1000 andalso Traced >= 1000 - erlang:system_info(schedulers)),
    ?assertMatch(#{sample := 3}, tracekit_ring:stats(R)).

set_bad_config_test_() ->
    R = ring(#{}),
    [?_assertEqual({error, {badopt, O}}, tracekit_ring:set(R, maps:from_list([O])))
     || O <- [{paused, 'maybe'}, {tags, [bogus]}, {tags, []}, {sample, 0},
              {sample, -1}, {sample, 1.5}, {colour, red}]] ++
    [?_assertEqual({error, {badopt, x}}, tracekit_ring:set(R, x)),
     ?_assertError(badarg, tracekit_ring:set(make_ref(), #{paused => true}))].

%% Integers either side of the small-integer range and of 64 bits, and
%% atoms, pids and ports of this node and another: each comes back as it
%% was, whether its word went as an index or not.
boundary_terms_round_trip_test() ->
    R = ring(#{}),
    Ints = [X + D || X <- [1 bsl 59, -(1 bsl 59), 1 bsl 60, 1 bsl 63, -(1 bsl 63),
                           1 bsl 64, -(1 bsl 64)],
                     D <- [-2, -1, 0, 1]],
    Remote = binary_to_term(<<131,88,100,0,8,"a@remote",0,0,0,1,0,0,0,0,0,0,0,7>>),
    Others = [true, false, undefined, '', list_to_atom(lists:duplicate(255, $x)),
              self(), list_to_pid("<0.0.0>"), list_to_pid("<0.32767.8191>"),
              Remote, hd(erlang:ports()), make_ref(), []],
    [?assertEqual(T, round_trip(R, T)) || T <- Ints ++ Others].

%% A timestamp given with the event ({Kind, Ts}, as tracekit:slow/2 records
%% the calls it keeps) comes back as it was given, {Mega, Sec, Micro} parts
%% of any size included.
given_timestamps_round_trip_test() ->
    R = ring(#{}),
    Max = 1 bsl 64 - 1,
    Nows = [{0, 0, 0}, {1, 2, 3}, erlang:timestamp(), {127, 128, 16383},
            {1 bsl 63 - 1, 1 bsl 63 - 1, 1 bsl 63 - 1}, {1 bsl 63, 0, 0},
            {0, Max, 0}, {Max, Max, Max},
            %% either side of the largest small integer (read from its word)
            {1 bsl 59 - 1, 1 bsl 59, 1 bsl 59 + 1}, {1 bsl 59, 1 bsl 59 - 1, 0}],
    Given = [{K, T} || K <- [timestamp, cpu_timestamp], T <- Nows] ++
            [{monotonic, M} || M <- [0, -1, 1 bsl 62, -(1 bsl 63), erlang:monotonic_time()]] ++
            [{strict_monotonic, {-5, 3}}, {strict_monotonic, {1 bsl 62, 1 bsl 62}}],
    [begin
         ok = tracekit_ring:trace_send(send, R, self(), m, #{timestamp => G}),
         ?assertMatch({_, [{trace_ts, _, send, m, _}]}, {G, tracekit_ring:drain(R)}),
         ok = tracekit_ring:trace_send(send, R, self(), m, #{timestamp => G}),
         [{trace_ts, _, send, m, Back}] = tracekit_ring:drain(R),
         ?assertEqual({G, Ts}, {G, Back})
     end || {_, Ts} = G <- Given],
    %% Not a timestamp (a negative part, a part that is no integer): the
    %% event is kept, without one.
    [begin
         ok = tracekit_ring:trace_send(send, R, self(), m, #{timestamp => {K, T}}),
         ?assertMatch({_, [{trace, _, send, m}]}, {T, tracekit_ring:drain(R)})
     end || K <- [timestamp, cpu_timestamp],
            T <- [{-1, 0, 0}, {0, -5, 7}, {-(1 bsl 59), 0, 0}, {0, 0, 1.5}, {a, 0, 0}]].
