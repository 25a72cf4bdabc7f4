%% tracekit_ring against what anyone can hand it: its callbacks called
%% directly with huge, deep and wrong terms, records at every size up to
%% the ring's limit, the limits of its options, set/2's promise under slow
%% events, and a reload of every NIF library while rings are in use.
-module(tracekit_ring_edge_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, end_per_testcase/2]).
-export([huge_tracee_and_extra/1, tags_that_are_not_trace_tags/1,
         records_up_to_the_limit_drain/1, follow_a_big_label/1,
         nesting_beyond_the_rule/1, follow_a_deep_label/1,
         set_holds_for_slow_events/1, set_rechecks_in_trace/1,
         funs_and_bignums_under_a_budget/1, match_spec_result_is_payload/1,
         full_payload_up_to_the_record_limit/1, count_ignores_junk_tags/1,
         option_error_shapes/1, sizes_beyond_memory/1, reload_nif_libraries/1,
         drain_returns_under_load/1]).
-export([memory_check_on_peer/0, echo/1]).

all() ->
    [huge_tracee_and_extra, tags_that_are_not_trace_tags,
     records_up_to_the_limit_drain, follow_a_big_label,
     nesting_beyond_the_rule, follow_a_deep_label, set_holds_for_slow_events,
     set_rechecks_in_trace, funs_and_bignums_under_a_budget,
     match_spec_result_is_payload, full_payload_up_to_the_record_limit,
     count_ignores_junk_tags, option_error_shapes, sizes_beyond_memory,
     reload_nif_libraries, drain_returns_under_load].

end_per_testcase(_, _) ->
    _ = seq_trace:set_system_tracer(false),
    _ = seq_trace:set_token([]),
    ok.

%% A term nested N levels: lists, tuples or maps around an atom.
deep(0, _) -> leaf;
deep(N, list) -> [deep(N - 1, list)];
deep(N, tuple) -> {deep(N - 1, tuple)};
deep(N, map) -> #{k => deep(N - 1, map)}.

%% Its depth as a ring hands it back: the marker ends a cut one.
depth(leaf) -> {0, whole};
depth('...') -> {0, cut};
depth([X]) -> inc(depth(X));
depth({X}) -> inc(depth(X));
depth(#{k := X}) -> inc(depth(X)).

inc({N, How}) -> {N + 1, How}.

%% Called directly, with a tracee that fills far more than the encoding
%% buffer, a timestamp and a 4 MB extra: once a buffer overflow. The event
%% is recorded within the record limit: the tracee whole, the extra cut to
%% what is left, and counted as truncated.
huge_tracee_and_extra(_Config) ->
    {ok, R} = tracekit_ring:new(),
    Tracee = binary:copy(<<1>>, 100000),
    Extra = binary:copy(<<7>>, 4000000),
    ok = tracekit_ring:trace(send, R, Tracee, x, #{extra => Extra, timestamp => monotonic}),
    [{trace_ts, Tracee, send, x, {'...', Prefix, 4000000}, Ts}] = tracekit_ring:drain(R),
    ?assert(is_integer(Ts)),
    ?assert(byte_size(Prefix) > 1000),
    ?assertEqual(binary:copy(<<7>>, byte_size(Prefix)), Prefix),
    ?assertMatch(#{written := 1, truncated := 1, buffered := 0, undecodable := 0},
                 tracekit_ring:stats(R)).

%% A tag that is not a trace tag (not an atom, or an atom the VM never
%% sends) is never stored: the event is counted as dropped, and drain has
%% nothing that could point into a dead heap.
tags_that_are_not_trace_tags(_Config) ->
    {ok, R} = tracekit_ring:new(),
    Tags = [{send}, [send], <<"send">>, 42, 1 bsl 70, 1.5, self(), make_ref(),
            fun() -> ok end, #{a => 1}, "send", foo, trace_status],
    [begin
         ok = tracekit_ring:trace(T, R, self(), hello, #{}),
         discard = tracekit_ring:enabled(T, R, self())
     end || T <- Tags, T =/= trace_status],
    ok = tracekit_ring:trace(trace_status, R, self(), hello, #{}),
    erlang:garbage_collect(),
    ?assertEqual([], tracekit_ring:drain(R)),
    %% Each refused once by trace/5 and once by enabled/3, trace_status
    %% (not a trace tag either) by trace/5 only.
    N = 2 * length(Tags) - 1,
    ?assertMatch(#{written := 0, dropped := N}, tracekit_ring:stats(R)),
    %% A real tag still goes through.
    ok = tracekit_ring:trace(send, R, self(), hello, #{extra => self()}),
    Self = self(),
    ?assertEqual([{trace, Self, send, hello, Self}], tracekit_ring:drain(R)).

%% Records of every size up to the record limit (a quarter of the ring)
%% are drained, and the ring goes on draining afterwards: a record larger
%% than the drain's batch once stopped its thread's ring for good.
records_up_to_the_limit_drain(_Config) ->
    {ok, R} = tracekit_ring:new(#{size => 1 bsl 20}),
    Sizes = [10, 60000, 65520, 65536, 66000, 131072, 200000, 262000],
    [ok = tracekit_ring:trace(send, R, self(), binary:copy(<<S:32>>, S div 4), #{})
     || S <- Sizes],
    Evs = tracekit_ring:drain(R),
    ?assertEqual([S div 4 * 4 || S <- Sizes], [byte_size(element(4, E)) || E <- Evs]),
    ?assertMatch(#{written := 8, truncated := 0, buffered := 0}, tracekit_ring:stats(R)),
    %% Then thousands of small ones, from real sends.
    S = trace:session_create(edge_after_big, {tracekit_ring, R}, []),
    P = spawn(fun() -> [self() ! I || I <- lists:seq(1, 8192)], receive stop -> ok end end),
    1 = trace:process(S, P, true, [send]),
    tk_collector:eventually(fun() -> length(tracekit_ring:drain(R, 8192)) > 0 end),
    P ! stop,
    trace:session_destroy(S),
    ?assertMatch(#{dropped := 0, undecodable := 0}, tracekit_ring:stats(R)).

%% A seq_trace label over 64 KiB: the ring gets the flow the process
%% tracer gets (it once got nothing).
follow_a_big_label(_Config) ->
    Label = binary:copy(<<"label">>, 14000),
    Flow = fun() -> Pid = spawn(fun() -> receive {P, M} -> P ! M end end),
                    Pid ! {self(), hi},
                    receive hi -> ok end
           end,
    {ok, ByRing} = tracekit_seq:follow(Flow, #{label => Label}),
    {ok, ByProcess} = tracekit_seq:follow(Flow, #{label => Label, tracer => process}),
    ?assert(length(ByProcess) >= 4),
    ?assertEqual(shape(ByProcess), shape(ByRing)).

shape(Events) ->
    lists:sort([{element(2, E), element(1, element(3, E)), element(2, element(3, E))}
                || E <- Events]).

%% Terms nested deeper than the rule (200 levels of containers) become the
%% marker in every payload mode; nothing deeper is written, so every record
%% decodes and none stays buffered.
nesting_beyond_the_rule(_Config) ->
    [begin
         {ok, R} = tracekit_ring:new(#{payload => Payload}),
         [ok = tracekit_ring:trace(send, R, self(), deep(N, Kind), #{}) || N <- [199, 200, 201, 300]],
         Evs = tracekit_ring:drain(R),
         ?assertEqual(4, length(Evs)),
         Depths = [depth(element(4, E)) || E <- Evs],
         case Payload of
             none -> ?assertEqual(['...'], lists:usort([element(4, E) || E <- Evs]));
             _ -> ?assertEqual([{199, whole}, {200, whole}, {200, cut}, {200, cut}], Depths)
         end,
         ?assertMatch(#{buffered := 0, undecodable := 0, written := 4},
                      tracekit_ring:stats(R))
     end || Kind <- [list, tuple, map], Payload <- [full, none, {max_bytes, 4096}]],
    ok.

%% A seq_trace label nested 300 deep: follow still gives the flow.
follow_a_deep_label(_Config) ->
    Label = deep(300, tuple),
    {ok, Evs} = tracekit_seq:follow(fun() -> seq_trace:print(Label, hello), ok end,
                                    #{label => Label}),
    ?assertMatch([{seq_trace, _, {print, {0, 1}, _, [], hello}}], Evs).

%% Events that take long to encode, on every scheduler: once set/2 has
%% returned, not one more is recorded (the read section lasts until the
%% record is pushed). Each sender gives up its scheduler after each send
%% (bump_reductions): its event costs it a few reductions but long to
%% encode, so it kept a scheduler for a whole time slice (hundreds of ms,
%% some tries seconds) and this process's 5 and 20 ms waits lasted that
%% long (15 s for the 40 tries, 42 s under ASan); its events, as slow as
%% before, are still being recorded on every scheduler when set/2 runs.
set_holds_for_slow_events(_Config) ->
    Big = [{I, <<I:64>>, [I]} || I <- lists:seq(1, 3000)],
    Bad = [Try || Try <- lists:seq(1, 40), not paused_holds(Big)],
    ?assertEqual([], Bad).

paused_holds(Big) ->
    {ok, R} = tracekit_ring:new(#{size => 1 bsl 20, policy => overwrite}),
    S = trace:session_create(edge_slow, {tracekit_ring, R}, []),
    Ps = [spawn(fun Loop() ->
                        self() ! Big,
                        receive _ -> ok end,
                        erlang:bump_reductions(1000),
                        Loop()
                end)
          || _ <- lists:seq(1, 2 * erlang:system_info(schedulers))],
    [1 = trace:process(S, P, true, [send]) || P <- Ps],
    timer:sleep(5),
    ok = tracekit_ring:set(R, #{paused => true}),
    #{written := W1} = tracekit_ring:stats(R),
    timer:sleep(20),
    #{written := W2} = tracekit_ring:stats(R),
    [exit(P, kill) || P <- Ps],
    trace:session_destroy(S),
    W1 =:= W2.

%% trace/5 checks the settings itself: an event the VM let through before
%% set/2 (or a direct call) is refused once set/2 has returned.
set_rechecks_in_trace(_Config) ->
    {ok, R} = tracekit_ring:new(),
    ok = tracekit_ring:set(R, #{paused => true}),
    ok = tracekit_ring:trace(send, R, self(), m, #{extra => self()}),
    ok = tracekit_ring:set(R, #{paused => false, tags => ['receive']}),
    ok = tracekit_ring:trace(send, R, self(), m, #{extra => self()}),
    ok = tracekit_ring:trace('receive', R, self(), m, #{}),
    Self = self(),
    ?assertEqual([{trace, Self, 'receive', m}], tracekit_ring:drain(R)),
    ?assertMatch(#{written := 1, filtered := 2}, tracekit_ring:stats(R)).

%% Under a budget, a fun is kept by name (its environment, whatever its
%% size, is never serialised) and an integer larger than the budget
%% becomes the marker; in full mode both are kept whole.
funs_and_bignums_under_a_budget(_Config) ->
    Env = binary:copy(<<3>>, 50000000),
    Fun = fun() -> byte_size(Env) end,
    Big = 1 bsl 800000,
    Ext = fun lists:map/2,
    {ok, R} = tracekit_ring:new(#{payload => {max_bytes, 64}}),
    [ok = tracekit_ring:trace(send, R, self(), T, #{}) || T <- [Fun, Big, -Big, 1 bsl 100, Ext]],
    [F, B1, B2, Small, E] = [element(4, X) || X <- tracekit_ring:drain(R)],
    ?assertMatch({'...', 'fun', <<"#Fun<", _/binary>>}, F),
    ?assertEqual(['...', '...'], [B1, B2]),
    ?assertEqual(1 bsl 100, Small),
    ?assertEqual(Ext, E),
    {ok, Full} = tracekit_ring:new(#{size => 1 bsl 20}),
    SmallFun = fun(X) -> X + 1 end,
    [ok = tracekit_ring:trace(send, Full, self(), T, #{}) || T <- [SmallFun, 1 bsl 1000]],
    ?assertEqual([SmallFun, 1 bsl 1000], [element(4, X) || X <- tracekit_ring:drain(Full)]).

%% The result of a {message, X} match-spec action is user data: under
%% payload none it becomes the marker, under a budget it is cut.
match_spec_result_is_payload(_Config) ->
    Arg = lists:seq(1, 5000),
    Events = [begin
                  {ok, R} = tracekit_ring:new(#{payload => P}),
                  S = trace:session_create(edge_msr, {tracekit_ring, R}, []),
                  1 = trace:function(S, {?MODULE, echo, 1},
                                     [{'_', [], [{message, '$_'}]}], [local]),
                  1 = trace:process(S, self(), true, [call]),
                  _ = ?MODULE:echo(Arg),
                  1 = trace:process(S, self(), false, [call]),
                  trace:session_destroy(S),
                  [E] = tracekit_ring:drain(R),
                  E
              end || P <- [full, none, {max_bytes, 100}]],
    [Full, None, Max] = [element(5, E) || E <- Events],
    %% '$_' is the argument list.
    ?assert([Arg] =:= Full),
    ?assertEqual('...', None),
    ?assert(size_of(Max) < 400),
    ?assertMatch([[1, 2, 3 | _]], Max).

echo(X) -> X.

size_of(T) -> erlang:external_size(T).

%% Under full, a term within the record limit is recorded whole (a
%% seq_trace print of a term of 195 KB in the external format, in a 1 MiB
%% ring, as OTP's seq_trace_SUITE prints one); one beyond it is cut and
%% counted. A 4096-byte ring's limit is a quarter of it.
full_payload_up_to_the_record_limit(_Config) ->
    Info = lists:seq(100000, 139000),
    ?assert(erlang:external_size(Info) > 190000),
    {ok, R} = tracekit_ring:new(#{size => 1 bsl 20}),
    _ = seq_trace:set_system_tracer({tracekit_ring, R}),
    _ = seq_trace:set_token(label, 17),
    _ = seq_trace:set_token(print, true),
    seq_trace:print(17, Info),
    _ = seq_trace:set_token([]),
    [{seq_trace, 17, {print, _, _, [], Got}}] = tracekit_ring:drain(R),
    ?assertEqual(Info, Got),
    ?assertMatch(#{truncated := 0}, tracekit_ring:stats(R)),
    {ok, Small} = tracekit_ring:new(#{size => 4096}),
    ok = tracekit_ring:trace(send, Small, self(), binary:copy(<<9>>, 5000), #{}),
    [{trace, _, send, {'...', Prefix, 5000}}] = tracekit_ring:drain(Small),
    ?assert(byte_size(Prefix) > 900 andalso byte_size(Prefix) < 1024),
    ?assertMatch(#{truncated := 1}, tracekit_ring:stats(Small)).

%% Junk tags neither count nor fill any table: a counter made after 300 of
%% them counts as usual.
count_ignores_junk_tags(_Config) ->
    {ok, C0} = tracekit_count:new(),
    [ok = tracekit_count:trace(list_to_atom("junk_" ++ integer_to_list(I)), C0, self(), x, #{})
     || I <- lists:seq(1, 300)],
    ok = tracekit_count:trace({not_an_atom}, C0, self(), x, #{}),
    ?assertEqual(#{}, tracekit_count:read(C0)),
    {ok, C} = tracekit_count:new(),
    S = trace:session_create(edge_count, {tracekit_count, C}, []),
    P = spawn(fun() -> [self() ! I || I <- lists:seq(1, 10)], receive stop -> ok end end),
    1 = trace:process(S, P, true, [send]),
    tk_collector:eventually(fun() -> tracekit_count:read(C) =:= #{send => 10} end),
    P ! stop,
    trace:session_destroy(S).

%% Bad options are {error, {badopt, _}}, never an exception; the limits
%% come from the library that enforces them.
option_error_shapes(_Config) ->
    #{max_size := Max, min_size := Min, max_bytes := MaxBytes} = tracekit_ring:limits(),
    Bad = [{payload, {max_bytes, 1 bsl 64}}, {payload, {max_bytes, MaxBytes + 1}},
           {payload, {max_bytes, 0}}, {size, Max * 2}, {size, Min div 2},
           {size, Min + 8}, {tags, [send | x]}, {tags, []}, {tags, [bogus]},
           {policy, keep}, {nope, 1}],
    [?assertEqual({error, {badopt, O}}, tracekit_ring:new([O])) || O <- Bad],
    {ok, R} = tracekit_ring:new(#{payload => {max_bytes, MaxBytes}}),
    [?assertEqual({error, {badopt, O}}, tracekit_ring:set(R, maps:from_list([O])))
     || O <- [{tags, [send | x]}, {tags, [bogus]}, {sample, 0}, {paused, perhaps}]],
    %% tracekit says which ring option is wrong, before anything is traced.
    ?assertMatch({error, {bad_option, {ring_size, _}, "size: " ++ _}},
                 tracekit:calls("lists:seq/2", #{ring_size => 1 bsl 31})),
    ?assertMatch({error, {bad_option, {payload, _}, "payload: " ++ _}},
                 tracekit:calls("lists:seq/2", #{payload => {max_bytes, 1 bsl 64}})).

%% new/1 touches a ring per scheduler at once: a size whose rings would
%% take more than half of the machine's memory is refused, with the reason.
sizes_beyond_memory(_Config) ->
    #{max_size := Max, memory := Mem} = tracekit_ring:limits(),
    Schedulers = Mem div Max + 1,
    case Schedulers =< 1024 of
        false ->
            {skip, "this machine has more memory than 1024 schedulers of the largest rings"};
        true ->
            Paths = [filename:dirname(code:which(M)) || M <- [tracekit_ring, ?MODULE]],
            {ok, Peer, _} = peer:start_link(
                              #{connection => standard_io,
                                args => ["+S", integer_to_list(Schedulers)
                                         | lists:append([["-pa", P] || P <- Paths])]}),
            try
                ?assertEqual(ok, peer:call(Peer, ?MODULE, memory_check_on_peer, [], 30000))
            after
                peer:stop(Peer)
            end
    end.

memory_check_on_peer() ->
    #{max_size := Max} = tracekit_ring:limits(),
    {error, {badopt, {size, Max}}} = tracekit_ring:new(#{size => Max}),
    {error, Why} = tracekit_ring:check_option(size, Max),
    true = string:find(Why, "memory") =/= nomatch,
    {error, {bad_option, {ring_size, Max}, _}} =
        tracekit:calls("lists:seq/2", #{ring_size => Max}),
    {ok, _} = tracekit_ring:new(#{size => 4096}),
    ok.

%% Every NIF library can be reloaded (a new version of its module) while
%% its resources are in use: rings, counters and models keep working.
reload_nif_libraries(_Config) ->
    {ok, R} = tracekit_ring:new(),
    {ok, C} = tracekit_count:new(),
    S = trace:session_create(edge_reload, {tracekit_ring, R}, []),
    S2 = trace:session_create(edge_reload_count, {tracekit_count, C}, []),
    Self = self(),
    P = spawn(fun Loop() -> receive {ping, N} -> Self ! {pong, N}, Loop() end end),
    [1 = trace:process(X, P, true, ['receive']) || X <- [S, S2]],
    Alive = tracekit_ring:alive(),
    Mods = [tracekit_ring, tracekit_count, tracekit_file, tracekit_seq, tracekit_model,
            tk_seq_refuse],
    [begin
         P ! {ping, I},
         receive {pong, I} -> ok end,
         [{module, M} = code:load_file(M) || M <- Mods],
         [true = code:soft_purge(M) || M <- Mods]
     end || I <- lists:seq(1, 3)],
    P ! {ping, 4},
    receive {pong, 4} -> ok end,
    tk_collector:eventually(fun() -> length(tracekit_ring:drain(R, 100)) >= 0 andalso
                                         tracekit_count:read(C) =:= #{'receive' => 4} end),
    ?assertMatch(#{written := 4}, tracekit_ring:stats(R)),
    ?assertEqual(Alive, tracekit_ring:alive()),
    ?assertEqual([{0, -1}], tracekit_seq:seq_order([{print, 0, 0, 1, 0, -1, 0, false}])),
    exit(P, kill),
    [trace:session_destroy(X) || X <- [S, S2]].

%% drain/1 takes what was waiting when it began: producers recording
%% faster than it decodes cannot keep it from returning.
drain_returns_under_load(_Config) ->
    {ok, R} = tracekit_ring:new(#{size => 1 bsl 20, policy => overwrite}),
    S = trace:session_create(edge_drain_load, {tracekit_ring, R}, []),
    Ps = [spawn(fun Loop() -> self() ! tick, receive tick -> Loop() end end)
          || _ <- lists:seq(1, 4 * erlang:system_info(schedulers))],
    [1 = trace:process(S, P, true, [send, 'receive']) || P <- Ps],
    timer:sleep(100),
    Self = self(),
    D = spawn(fun() -> [_ = tracekit_ring:drain(R) || _ <- lists:seq(1, 5)],
                       Self ! {drained, self()} end),
    receive {drained, D} -> ok
    after 20000 -> error(drain_does_not_return)
    end,
    [exit(P, kill) || P <- Ps],
    trace:session_destroy(S).
