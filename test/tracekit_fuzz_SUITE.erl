%% Random-term fuzzing of every NIF of tracekit's NIF libraries, called
%% directly (the tracer callbacks included) with random and real arguments:
%% random tags, states (real rings and counters, closed ones, other
%% resources, junk), tracees and trace terms (huge binaries, terms nested
%% 150-300 deep, improper lists, bignums, funs with big environments,
%% references, remote pids and ports), option maps and raw NIF arguments.
%%
%% A model follows every ring and counter the fuzzer made, and says what
%% each call must answer and count. After the calls every ring is drained
%% and checked: every call returned or raised badarg (or returned {error,
%% _}), the counters add up (written + dropped + filtered is every event
%% offered to a live ring, undecodable stays 0, nothing is left buffered
%% after a drain), and every drained event is the event that was offered,
%% in the order it was offered, as the ring's payload mode and room keep
%% it (exactly, when it certainly fits).
%%
%% Each case runs on a peer node: a crash of a NIF fails that case and
%% leaves the test node alive, and the peer can load versions of the NIF
%% modules that export everything (from their debug info), so that the raw
%% NIF stubs (new_nif/5, set_nif/4, drain_chunk/2, ...) are called directly.
%% That also reloads each NIF library while rings made by the previous
%% version are in use (the upgrade and unload callbacks).
%%
%% Environment: TRACEKIT_FUZZ_ITERATIONS (calls per fuzzing case, default
%% 1500; `make test-nif-asan' runs many more), TRACEKIT_FUZZ_SEED (to
%% replay a run; the seed is in each case's log and in every failure).
-module(tracekit_fuzz_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0, init_per_testcase/2, end_per_testcase/2]).
-export([every_nif_is_fuzzed/1, ring_fuzz/1, count_fuzz/1, nif_fuzz/1,
         concurrent_rings/1, big_tracee_with_extra_and_timestamp/1,
         tags_that_are_not_atoms/1, records_larger_than_a_batch/1,
         deep_terms/1, file_reader_fuzz/1, latency_fuzz/1, concurrent_latency/1]).
%% Called on the peer.
-export([on_peer/2]).

-define(DEFAULT_ITERATIONS, 1500).
-define(MAX_DEPTH, 200).          % tk_term.h: TK_TERM_MAX_DEPTH
-define(TS_KINDS, [timestamp, cpu_timestamp, monotonic, strict_monotonic]).
-define(CLASSES, [send, 'receive', call, procs, ports, running_procs,
                  running_ports, garbage_collection]).
-define(MAX_RINGS, 6).

suite() ->
    [{timetrap, {minutes, 40}}].

all() ->
    [every_nif_is_fuzzed, big_tracee_with_extra_and_timestamp,
     tags_that_are_not_atoms, records_larger_than_a_batch, deep_terms,
     ring_fuzz, count_fuzz, nif_fuzz, concurrent_rings, file_reader_fuzz, latency_fuzz,
     concurrent_latency].

init_per_testcase(Case, Config) ->
    Seed = seed(),
    Iterations = iterations(),
    ct:log("~p: seed ~p, ~p iterations (TRACEKIT_FUZZ_SEED=~p replays it)",
           [Case, Seed, Iterations, Seed]),
    Paths = lists:usort([filename:dirname(code:which(M))
                         || M <- [tracekit_ring, ?MODULE]]),
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                      args => lists:append([["-pa", P] || P <- Paths])}),
    Params = #{seed => Seed, iterations => Iterations,
               dir => ?config(priv_dir, Config)},
    [{peer, Peer}, {params, Params} | Config].

end_per_testcase(_Case, Config) ->
    try peer:stop(?config(peer, Config))
    catch _:_ -> ok
    end,
    ok.

seed() ->
    case os:getenv("TRACEKIT_FUZZ_SEED") of
        S when is_list(S), S =/= "" -> list_to_integer(S);
        _ -> erlang:phash2({os:system_time(), erlang:unique_integer()})
    end.

iterations() ->
    case os:getenv("TRACEKIT_FUZZ_ITERATIONS") of
        S when is_list(S), S =/= "" -> list_to_integer(S);
        _ -> ?DEFAULT_ITERATIONS
    end.

%% Runs Fun on the peer; the peer must still be up and answering after.
run(Config, Fun) ->
    Peer = ?config(peer, Config),
    Params = ?config(params, Config),
    Result = peer:call(Peer, ?MODULE, on_peer, [Fun, Params], 35 * 60000),
    ct:log("~p: ~p", [Fun, Result]),
    ?assertEqual(running, peer:get_state(Peer)),
    ?assert(is_integer(peer:call(Peer, erlang, system_info, [process_count]))),
    Result.

every_nif_is_fuzzed(Config) ->
    #{generic := Generic, modules := Mods, seq_order := Seq} = run(Config, nif_table),
    ct:log("NIF modules ~p; seq_order/1 in ~p; fuzzed with random arguments "
           "only: ~p", [Mods, Seq, Generic]),
    ?assert(lists:member(tracekit_ring, Mods)),
    ?assert(lists:member(tracekit_count, Mods)),
    ?assert(lists:member(Seq, Mods)),
    ?assertEqual([], [G || {_, seq_order, 1} = G <- Generic]).

ring_fuzz(Config) ->
    #{calls := Calls, rings := Rings, events := Events, not_called := []} =
        run(Config, ring_fuzz),
    ?assert(Calls >= iterations()),
    ?assert(Rings > 0),
    ?assert(Events > 0).

count_fuzz(Config) ->
    #{calls := Calls, counted := Counted, not_called := []} = run(Config, count_fuzz),
    ?assert(Calls >= iterations()),
    ?assert(Counted > 0).

nif_fuzz(Config) ->
    #{orders := Orders, badargs := Badargs, not_called := []} = run(Config, nif_fuzz),
    ?assert(Orders > 0),
    ?assert(Badargs > 0).

concurrent_rings(Config) ->
    #{events := Events, ordered := Ordered} = run(Config, concurrent_rings),
    ?assert(Events > 0),
    ?assert(Ordered > 0).

latency_fuzz(Config) ->
    #{calls := Calls, tracers := Tracers, measured := Measured, not_called := []} =
        run(Config, latency_fuzz),
    ?assert(Calls >= iterations()),
    ?assert(Tracers > 0),
    ?assert(Measured > 0).

concurrent_latency(Config) ->
    #{measured := Measured} = run(Config, concurrent_latency),
    ?assert(Measured > 0).

big_tracee_with_extra_and_timestamp(Config) ->
    #{events := N, truncated := T} = run(Config, big_tracee_with_extra_and_timestamp),
    ?assert(N > 0),
    ?assert(T > 0).

tags_that_are_not_atoms(Config) ->
    #{calls := N} = run(Config, tags_that_are_not_atoms),
    ?assert(N > 0).

records_larger_than_a_batch(Config) ->
    #{events := N} = run(Config, records_larger_than_a_batch),
    ?assert(N > 0).

deep_terms(Config) ->
    #{events := N} = run(Config, deep_terms),
    ?assert(N > 0).

%% Trace files' decoder paths with crafted chunks: dictionary entries of
%% every kind (whole, damaged, compressed, nested 300 deep, atoms of 255
%% and 256 characters) against the rule that an entry is an atom, a pid,
%% a port or [] that binary_to_term/1 takes whole; records referring to
%% entries that are and are not there, with external terms that are and
%% are not too deep; references that stand for more than an events chunk
%% may; and private_dir_nif/2 with random parents and prefixes.
file_reader_fuzz(Config) ->
    #{entries := E, accepted := A, chunks := C, dirs := D} = run(Config, file_reader_fuzz),
    ?assert(E >= iterations() div 2),
    ?assert(A > 0),
    ?assert(C > 0),
    ?assert(D > 0).

%%% ==== on the peer ==========================================================

on_peer(Fun, #{seed := Seed, dir := Dir} = Params) ->
    ok = file:set_cwd(Dir),
    _ = rand:seed(exsss, Seed),
    put(fuzz_seed, Seed),
    put(fuzz_op, 0),
    put(fuzz_nifs, reload()),
    erlang:garbage_collect(),
    put(fuzz_ctx, context()),
    peer_case(Fun, Params).

%% A ring and a counter made by the modules as they were loaded are used
%% before and after open_nifs/0: the upgrade keeps them valid.
reload() ->
    {ok, Keep} = tracekit_ring:new(#{size => 4096}),
    {ok, Count} = tracekit_count:new(),
    {ok, Lat} = tracekit_latency:new(#{size => 4096}),
    ok = tracekit_ring:trace(send, Keep, self(), before_reload, #{}),
    ok = tracekit_count:trace(send, Count, self(), x, #{}),
    ok = tracekit_latency:trace_call(call, Lat, self(), {m, f, [1]}, #{}),
    Nifs = open_nifs(),
    ok = tracekit_ring:trace(send, Keep, self(), after_reload, #{}),
    ok = tracekit_count:trace(send, Count, self(), x, #{}),
    %% The call made before the reload returns after it, and is paired by
    %% the thread the tracer has had all along.
    ok = tracekit_latency:trace_call(return_from, Lat, self(), {m, f, 1}, #{}),
    ok = tracekit_latency:close(Lat),
    Me = self(),
    check(tracekit_ring:drain(Keep) =:= [{trace, Me, send, before_reload},
                                         {trace, Me, send, after_reload}]
          andalso tracekit_count:read(Count) =:= #{send => 2}
          andalso maps:get(measured, tracekit_latency:stats(Lat)) =:= 1,
          reload_lost_state),
    Nifs.

%% What a process the fuzzer spawns needs from its parent's dictionary.
inherit() ->
    D = [{K, get(K)} || K <- [fuzz_seed, fuzz_nifs, fuzz_ctx]],
    fun(I) ->
            [put(K, V) || {K, V} <- D],
            put(fuzz_op, 0),
            _ = rand:seed(exsss, get(fuzz_seed) + I),
            ok
    end.

%% Loads every NIF module of the application again, compiled from its own
%% debug info with every function exported (the same code, the same NIF
%% library, which the VM upgrades), and purges the previous version (the
%% library's unload). Returns #{Module => [{Name, Arity}]} of the NIFs.
open_nifs() ->
    Ebin = filename:dirname(code:which(tracekit_ring)),
    Mods = [list_to_atom(filename:basename(F, ".beam"))
            || F <- filelib:wildcard(filename:join(Ebin, "*.beam"))],
    maps:from_list(
      [{M, Nifs} || M <- Mods, {Forms, Nifs} <- [forms(M)], Nifs =/= [],
                    ok =:= reload_exporting_all(M, Forms)]).

forms(M) ->
    File = code:which(M),
    {ok, {M, [{abstract_code, {raw_abstract_v1, Forms}}]}} =
        beam_lib:chunks(File, [abstract_code]),
    {Forms, lists:append([L || {attribute, _, nifs, L} <- Forms])}.

reload_exporting_all(M, Forms) ->
    {ok, M, Bin} = compile:forms(Forms, [export_all, nowarn_export_all, binary]),
    {module, M} = code:load_binary(M, code:which(M), Bin),
    true = code:soft_purge(M),
    ok.

%% The NIFs each fuzzing case knows the meaning of; every other NIF of the
%% application gets random arguments in nif_fuzz. (seq_order/1 is in the
%% module of tracekit's NIFs that are not tracers, whatever its name.)
known_nifs() ->
    Callbacks = lists:append([[{E, 3}, {T, 5}] || {E, T} <- callbacks()]),
    #{tracekit_ring => [{new_nif, 5}, {set_nif, 4}, {close, 1}, {stats, 1},
                        {drain_chunk, 2}, {drain_all, 1}, {alive, 0},
                        {limits, 0}, {tags, 0} | Callbacks],
      tracekit_count => [{new, 0}, {read, 1}, {reset, 1}, {close, 1},
                         {enabled, 3}, {trace, 5}],
      %% (private_dir_nif/2 would make directories wherever random paths
      %% point: file_reader_fuzz calls it with parents of its own.)
      tracekit_file => [{private_dir_nif, 2}],
      tracekit_latency => [{new_nif, 6}, {resume, 1}, {close, 1}, {read, 1}, {stats, 1},
                           {limits, 0}, {layout, 0}, {bucket, 1}, {histogram_nif, 1}
                           | Callbacks],
      seq_module() => [{seq_order, 1}]}.

seq_module() ->
    case [M || {M, Nifs} <- maps:to_list(get(fuzz_nifs)),
               lists:member({seq_order, 1}, Nifs)] of
        [M] -> M;
        [] -> fail(no_seq_order_nif)
    end.

generic_nifs() ->
    Nifs = get(fuzz_nifs),
    Known = known_nifs(),
    [{M, F, A} || {M, L} <- lists:sort(maps:to_list(Nifs)), {F, A} <- L,
                  not lists:member({F, A}, maps:get(M, Known, []))].

callbacks() ->
    [{enabled, trace}
     | [{list_to_atom("enabled_" ++ atom_to_list(C)),
         list_to_atom("trace_" ++ atom_to_list(C))} || C <- ?CLASSES]].

peer_case(nif_table, _) ->
    Nifs = get(fuzz_nifs),
    %% Every NIF the cases know is still a NIF of its module.
    maps:foreach(
      fun(M, Known) ->
              Stale = Known -- maps:get(M, Nifs, []),
              Stale =:= [] orelse fail({stale_known_nifs, M, Stale})
      end, known_nifs()),
    #{modules => lists:sort(maps:keys(Nifs)), generic => generic_nifs(),
      seq_order => seq_module()};
peer_case(ring_fuzz, #{iterations := N}) ->
    ring_fuzz_run(N);
peer_case(count_fuzz, #{iterations := N}) ->
    count_fuzz_run(N);
peer_case(nif_fuzz, #{iterations := N}) ->
    nif_fuzz_run(N);
peer_case(concurrent_rings, #{iterations := N}) ->
    concurrent_run(N);
peer_case(big_tracee_with_extra_and_timestamp, _) ->
    big_tracee_run();
peer_case(tags_that_are_not_atoms, _) ->
    junk_tags_run();
peer_case(file_reader_fuzz, #{iterations := N}) ->
    reader_fuzz_run(N);
peer_case(records_larger_than_a_batch, _) ->
    large_records_run();
peer_case(deep_terms, _) ->
    deep_terms_run();
peer_case(latency_fuzz, #{iterations := N}) ->
    latency_fuzz_run(N);
peer_case(concurrent_latency, #{iterations := N}) ->
    concurrent_latency_run(N).

%%% ---- calls and failures -----------------------------------------------------

%% Calls a NIF (or an API function); the answer is {ok, Value}, {badarg}
%% or {raised, {error, _}}; any other exception fails the run.
call(M, F, Args) ->
    put(fuzz_op, case get(fuzz_op) of undefined -> 1; N -> N + 1 end),
    put({fuzz_called, M, F, length(Args)}, true),
    try apply(M, F, Args) of
        V -> {ok, V}
    catch
        error:badarg -> {badarg};
        error:{error, _} = E -> {raised, E};
        Class:Reason:Stack ->
            fail({unexpected_exception, {M, F, brief(Args)},
                  {Class, Reason, lists:sublist(Stack, 3)}})
    end.

fail(What) ->
    erlang:error({fuzz_failure, #{seed => get(fuzz_seed), op => get(fuzz_op),
                                  what => What}}).

check(true, _What) -> ok;
check(false, What) -> fail(What).

%% A term shortened for a report.
brief(T) ->
    S = lists:flatten(io_lib:format("~P", [T, 12])),
    case length(S) > 600 of
        true -> lists:sublist(S, 600) ++ "...";
        false -> S
    end.

%%% ---- random choices ---------------------------------------------------------

pick(L) when is_list(L) -> lists:nth(rand:uniform(length(L)), L);
pick(T) when is_tuple(T) -> element(rand:uniform(tuple_size(T)), T).

chance(P) -> rand:uniform() < P.

%% One of [{Weight, Value}].
weighted(L) ->
    Total = lists:sum([W || {W, _} <- L]),
    weighted(rand:uniform(Total), L).

weighted(N, [{W, V} | _]) when N =< W -> V;
weighted(N, [{W, _} | T]) -> weighted(N - W, T).

%%% ---- terms ------------------------------------------------------------------

%% Terms that are costly to make, made once per run.
context() ->
    Big = binary:copy(<<"0123456789abcdef">>, 4096 * 4),   % 256 KiB
    Dead = spawn(fun() -> ok end),
    Mon = erlang:monitor(process, Dead),
    receive {'DOWN', Mon, process, Dead, _} -> ok end,
    Port = open_port({spawn, "cat"}, [binary]),
    {ok, Counter} = tracekit_count:new(),
    #{big => Big,
      huge => binary:copy(<<7>>, 4000000),
      sizes => [65530, 65536 - 16, 65536, 65537, 100000, 200000, 262100, 300000],
      dead_pid => Dead, port => Port, counter => Counter,
      atomics => atomics:new(1, []),
      remote => [remote_pid(N, I, C) || N <- ['fuzz@nohost', 'a@b'],
                                        I <- [0, 7, 1 bsl 27], C <- [1, 1 bsl 31]]
                ++ [remote_port(N, I) || N <- ['fuzz@nohost'], I <- [0, 9, 1 bsl 40]]
                ++ [remote_ref(N, L) || N <- ['fuzz@nohost', 'a@b'], L <- [1, 3, 5]],
      long_atom => list_to_atom(lists:duplicate(255, $x)),
      tags => tracekit_ring:tags()}.

ctx(K) -> maps:get(K, get(fuzz_ctx)).

atom_ext(A) ->
    B = atom_to_binary(A, utf8),
    <<118, (byte_size(B)):16, B/binary>>.

remote_pid(Node, Id, Creation) ->
    binary_to_term(<<131, 88, (atom_ext(Node))/binary, Id:32, 0:32, Creation:32>>).

remote_port(Node, Id) ->
    binary_to_term(<<131, 120, (atom_ext(Node))/binary, Id:64, 3:32>>).

remote_ref(Node, Len) ->
    Ids = << <<(rand:uniform(1 bsl 30)):32>> || _ <- lists:seq(1, Len) >>,
    binary_to_term(<<131, 90, Len:16, (atom_ext(Node))/binary, 5:32, Ids/binary>>).

leaf() ->
    case rand:uniform(20) of
        1 -> pick([a, ok, undefined, '...', '', 'ÿ', 'fun', send, true, false,
                   trace, trace_ts, seq_trace, timestamp, ctx(long_atom)]);
        2 -> rand:uniform(2000) - 1000;
        3 -> pick([1 bsl 27 - 1, 1 bsl 31 - 1, 1 bsl 31, -(1 bsl 31), -(1 bsl 31) - 1,
                   1 bsl 32, 1 bsl 59 - 1, 1 bsl 59, -(1 bsl 59), -(1 bsl 59) - 1,
                   1 bsl 63 - 1, 1 bsl 63, -(1 bsl 63), -(1 bsl 63) - 1,
                   1 bsl 64 - 1, 1 bsl 64, -(1 bsl 64)]);
        4 -> (1 bsl (64 + rand:uniform(2000))) * pick([1, -1]) + rand:uniform(1000);
        5 -> pick([0.0, -0.0, 1.0e308, -1.0e-308, 5.0e-324, 3.14, rand:uniform()]);
        6 -> rand:bytes(rand:uniform(40) - 1);
        7 -> <<(rand:bytes(rand:uniform(5) - 1))/binary, (rand:uniform(7)):3>>;
        8 -> pick([self(), ctx(dead_pid), ctx(port), pick(ctx(remote))]);
        9 -> pick([make_ref(), alias(), ctx(atomics), ctx(counter), pick(ctx(remote))]);
        10 -> pick([fun lists:map/2, fun erlang:self/0, fun_with([]), fun_with(small)]);
        11 -> pick([[], {}, #{}, "hello", <<>>]);
        12 -> binary:part(ctx(big), rand:uniform(100), rand:uniform(300));
        _ -> pick([x, y, z, 0, 1, -1, 42, <<"b">>, [], "s"])
    end.

%% A local fun whose environment holds Env (its size is the fun's).
fun_with(small) -> fun_with({self(), make_ref(), "env"});
fun_with(Env) -> fun() -> Env end.

%% A random term of about Budget nodes, occasionally something big.
term(Budget) when Budget =< 1 -> leaf();
term(Budget) ->
    case rand:uniform(12) of
        1 -> list(Budget);
        2 -> list(Budget);
        3 -> improper(Budget);
        4 -> tuple(Budget);
        5 -> tuple(Budget);
        6 -> map(Budget);
        7 -> mfa_like(Budget);
        _ -> leaf()
    end.

split(Budget) ->
    N = rand:uniform(min(Budget, 8)),
    {N, max(1, (Budget - 1) div N)}.

list(Budget) ->
    {N, B} = split(Budget),
    [term(B) || _ <- lists:seq(1, N)].

improper(Budget) ->
    {N, B} = split(Budget),
    lists:foldl(fun(_, Acc) -> [term(B) | Acc] end,
                pick([x, 1, <<"t">>, {t}, #{}, 2.5]), lists:seq(1, N)).

tuple(Budget) ->
    {N, B} = split(Budget),
    list_to_tuple([term(B) || _ <- lists:seq(1, N)]).

map(Budget) ->
    {N, B} = split(Budget),
    maps:from_list([{term(B div 2 + 1), term(B div 2 + 1)} || _ <- lists:seq(1, N)]).

mfa_like(Budget) ->
    {pick([lists, erlang, ?MODULE, x]), pick([map, foo, '']), list(Budget)}.

%% Something big, deep or wide.
special() ->
    case rand:uniform(16) of
        1 -> binary:copy(<<(rand:uniform(255))>>, pick(ctx(sizes)));
        2 -> binary:part(ctx(huge), 1, pick(ctx(sizes)) - 2);
        3 -> lists:seq(1, pick([1000, 20000]));
        4 -> lists:duplicate(70000, $a);
        5 -> deep(150 + rand:uniform(151) - 1);
        6 -> deep(pick([199, 200, 201]));
        7 -> list_to_tuple(lists:seq(1, 5000));
        8 -> maps:from_list([{I, term(2)} || I <- lists:seq(1, 40 + rand:uniform(200))]);
        9 -> fun_with(binary:copy(<<1>>, pick(ctx(sizes))));
        10 -> fun_with(lists:seq(1, 30000));
        11 -> (1 bsl pick([530000, 70000 * 8, 1000000])) - 1;
        12 -> pick([ctx(huge), binary:part(ctx(huge), 3, 3999990)]);
        13 -> <<(binary:copy(<<2>>, 70000))/binary, 5:3>>;
        14 -> lists:foldl(fun(_, A) -> [A | x] end, x, lists:seq(1, 250));
        15 -> [deep(190), deep(210), ctx(big)];
        _ -> term(60)
    end.

%% A term nested N levels deep, each level a random kind of container.
deep(N) ->
    lists:foldl(fun(_, Inner) ->
                        case rand:uniform(6) of
                            1 -> [Inner];
                            2 -> {Inner};
                            3 -> {a, Inner, b};
                            4 -> #{k => Inner};
                            5 -> [Inner | tail];
                            6 -> #{Inner => v}
                        end
                end, leaf(), lists:seq(1, N)).

any_term() ->
    case chance(0.06) of
        true -> special();
        false -> term(rand:uniform(30))
    end.

%%% ==== tracekit_ring =========================================================

%% The model of a ring made by the fuzzer.
new_model(Res, Size, Policy, Mode, Tags) ->
    #{res => Res, id => erlang:unique_integer([positive]), size => Size,
      policy => Policy, mode => Mode, tags => Tags, paused => false,
      sample => 1, closed => false,
      offered => 0,       % events counted in written, dropped or filtered
      filtered_min => 0,  % ... of them certainly filtered
      ambiguous => 0,     % enabled's discards that are filtered or dropped
      lost => 0,          % certainly dropped (a tag that is not a trace tag)
      eligible => 0,      % trace calls that reached the recording
      pending => queue:new(),  % their expected events, oldest first
      drained => 0}.

ring_fuzz_run(N) ->
    Base = tracekit_ring:alive(),
    St0 = #{rings => [], dead => [], calls => 0, made => 0, events => 0},
    %% N calls, then more until every NIF of the module has been called.
    St1 = until_all_called(tracekit_ring, fun(S) -> ring_loop(100, S) end,
                           ring_loop(N, St0)),
    St2 = lists:foldl(fun(M, S) -> drop_ring(M, S) end, St1#{rings := []},
                      maps:get(rings, St1)),
    %% Nothing refers to the fuzzer's rings any more: all of them are freed.
    erlang:garbage_collect(),
    wait_alive(Base, 100),
    #{calls => maps:get(calls, St2), rings => maps:get(made, St2),
      events => maps:get(events, St2), whole => get_int(fuzz_whole),
      not_called => not_called(tracekit_ring)}.

%% The NIFs of a module the fuzzer has not called yet.
not_called(M) ->
    [{F, A} || {F, A} <- maps:get(M, get(fuzz_nifs)),
               get({fuzz_called, M, F, A}) =/= true].

until_all_called(M, More, St) ->
    until_all_called(M, More, St, 100).

until_all_called(_, _, St, 0) -> St;
until_all_called(M, More, St, K) ->
    case not_called(M) of
        [] -> St;
        _ -> until_all_called(M, More, More(St), K - 1)
    end.

wait_alive(Base, 0) -> fail({rings_not_freed, tracekit_ring:alive(), Base});
wait_alive(Base, N) ->
    case tracekit_ring:alive() of
        Base -> ok;
        _ -> erlang:garbage_collect(), timer:sleep(20), wait_alive(Base, N - 1)
    end.

ring_loop(0, St) -> St;
ring_loop(N, St0) ->
    St = St0#{calls := maps:get(calls, St0) + 1},
    St1 = case maps:get(rings, St) of
              [] -> op_new(St);
              _ -> ring_op(weighted([{40, trace}, {20, enabled}, {3, new},
                                     {3, new_nif}, {3, set}, {3, set_nif},
                                     {8, drain}, {3, stats}, {1, close},
                                     {2, misc}, {1, drop}, {2, check}]), St)
          end,
    ring_loop(N - 1, St1).

ring_op(trace, St) -> op_trace(St);
ring_op(enabled, St) -> op_enabled(St);
ring_op(new, St) -> op_new(St);
ring_op(new_nif, St) -> op_new_nif(St);
ring_op(set, St) -> op_set(St);
ring_op(set_nif, St) -> op_set_nif(St);
ring_op(drain, St) -> op_drain(St);
ring_op(stats, St) -> op_stats(St);
ring_op(close, St) -> op_close(St);
ring_op(misc, St) -> op_misc(St);
ring_op(drop, St) ->
    [M | Rest] = maps:get(rings, St),
    drop_ring(M, St#{rings := Rest});
ring_op(check, St) ->
    St#{rings := [check_ring(M) || M <- maps:get(rings, St)]}.

%% A state for an API call or (Callback true) a callback. A copy of a
%% dropped ring's reference (closed, maybe already freed) is only given to
%% callbacks, for which a closed ring and junk are the same.
gen_state(St) -> gen_state(St, false).

gen_state(St, Callback) ->
    Rings = maps:get(rings, St),
    case weighted([{70, ring}, {5, copy}, {15, junk}, {5, dead}, {5, counter}]) of
        ring when Rings =/= [] -> maps:get(res, pick(Rings));
        copy when Rings =/= [] -> binary_to_term(term_to_binary(maps:get(res, pick(Rings))));
        dead when Callback, map_get(dead, St) =/= [] ->
            binary_to_term(pick(maps:get(dead, St)));
        counter -> ctx(counter);
        _ -> pick([undefined, self(), make_ref(), ctx(atomics), 0, <<>>,
                   {tracekit_ring, undefined}, [], leaf()])
    end.

%% The ring model a state term is, if any.
ring_of(S, Rings) ->
    case [M || M <- Rings, maps:get(res, M) =:= S] of
        [M] -> M;
        [] -> none
    end.

replace(M, St) ->
    Id = maps:get(id, M),
    St#{rings := [case maps:get(id, X) of Id -> M; _ -> X end
                  || X <- maps:get(rings, St)]}.

gen_tag() ->
    case rand:uniform(20) of
        1 -> pick([trace_status, foo, trace, '', call_count]);
        2 -> pick([{send}, 1, "send", <<"send">>, self(), make_ref(), [send],
                   1.0, 1 bsl 70, #{send => 1}, fun erlang:self/0]);
        _ -> pick(ctx(tags))
    end.

gen_tracee() ->
    case rand:uniform(6) of
        1 -> self();
        2 -> pick([ctx(port), ctx(dead_pid), undefined, pick(ctx(remote))]);
        _ -> any_term()
    end.

%% A trace term shaped for the tag most of the time.
gen_msg(Tag) ->
    case chance(0.35) of
        true -> any_term();
        false -> shaped(Tag)
    end.

shaped(call) -> {pick([lists, m]), pick([seq, f]), [any_term() || _ <- lists:seq(1, rand:uniform(4) - 1)]};
shaped(return_from) -> {m, f, rand:uniform(5)};
shaped(exception_from) -> {m, f, rand:uniform(5)};
shaped(seq_trace) ->
    pick([{send, {1, 2}, self(), ctx(dead_pid), any_term()},
          {'receive', {1, 2}, self(), self(), any_term()},
          {print, {3, 4}, self(), undefined, any_term()}]);
shaped(_) -> any_term().

gen_extra(Tag) when Tag =:= spawn; Tag =:= spawned ->
    case chance(0.7) of
        true -> {m, f, [any_term() || _ <- lists:seq(1, rand:uniform(3) - 1)]};
        false -> any_term()
    end;
gen_extra(exception_from) ->
    case chance(0.7) of
        true -> {pick([error, exit, throw]), any_term()};
        false -> any_term()
    end;
gen_extra(_) ->
    any_term().

gen_opts(Tag) ->
    case rand:uniform(10) of
        1 -> #{};
        2 -> pick([[], [{timestamp, monotonic}], nil, 7, {extra, 1}]);
        3 -> maps:from_list([{I, I} || I <- lists:seq(1, 40)] ++
                            [{timestamp, pick(?TS_KINDS)}]);
        _ ->
            Keys = [{extra, fun() -> gen_extra(Tag) end},
                    {match_spec_result, fun any_term/0},
                    {scheduler_id, fun() -> pick([1, 2, 1 bsl 40, x, any_term()]) end},
                    {timestamp, fun() -> pick(?TS_KINDS ++ [foo, 1, {monotonic}]) end},
                    {junk, fun any_term/0}],
            maps:from_list([{case K of junk -> pick([foo, "extra", {timestamp}, 1]); _ -> K end, G()}
                            || {K, G} <- Keys, chance(0.4)])
    end.

%% Opts as the tracer reads them: {Extra, Msr, Sched, TsKind}, each field
%% present as {Value}, absent as none.
read_opts(Opts) when is_map(Opts) ->
    F = fun(K) -> case maps:find(K, Opts) of {ok, V} -> {V}; error -> none end end,
    Ts = case maps:find(timestamp, Opts) of
             {ok, K} -> case lists:member(K, ?TS_KINDS) of true -> K; false -> none end;
             error -> none
         end,
    {F(extra), F(match_spec_result), F(scheduler_id), Ts};
read_opts(_) ->
    {none, none, none, none}.

live(none) -> false;
live(M) -> not maps:get(closed, M).

is_tag(T) -> lists:member(T, ctx(tags)).

wanted(Tag, M) ->
    not maps:get(paused, M) andalso
        (maps:get(tags, M) =:= all orelse lists:member(Tag, maps:get(tags, M))).

bump(Keys, M) ->
    lists:foldl(fun(K, Acc) -> Acc#{K := maps:get(K, Acc) + 1} end, M, Keys).

op_trace(St) ->
    {_, TraceF} = pick(callbacks()),
    Tag = gen_tag(),
    State = gen_state(St, true),
    Tracee = gen_tracee(),
    Msg = gen_msg(Tag),
    Opts = gen_opts(Tag),
    Args = [Tag, State, Tracee, Msg, Opts],
    R = call(tracekit_ring, TraceF, Args),
    check(R =:= {ok, ok}, {trace_answer, TraceF, R}),
    M = ring_of(State, maps:get(rings, St)),
    case live(M) of
        false -> St;
        true ->
            M1 = case is_tag(Tag) of
                     false -> bump([offered, lost], M);
                     true ->
                         case wanted(Tag, M) of
                             false -> bump([offered, filtered_min], M);
                             true ->
                                 E = expect(Tag, Tracee, Msg, Opts, M),
                                 M2 = bump([offered, eligible], M),
                                 M2#{pending := queue:in(E, maps:get(pending, M))}
                         end
                 end,
            replace(M1, St)
    end.

op_enabled(St) ->
    {EnabledF, _} = pick(callbacks()),
    Tag = case chance(0.1) of true -> trace_status; false -> gen_tag() end,
    State = gen_state(St, true),
    R = call(tracekit_ring, EnabledF, [Tag, State, gen_tracee()]),
    M = ring_of(State, maps:get(rings, St)),
    What = {enabled_answer, EnabledF, Tag, R},
    case live(M) of
        false when Tag =:= trace_status ->
            check(R =:= {ok, remove}, What), St;
        false ->
            check(R =:= {ok, discard}, What), St;
        true when Tag =:= trace_status ->
            check(R =:= {ok, trace}, What), St;
        true ->
            case {is_tag(Tag), wanted(Tag, M), R} of
                {false, _, {ok, discard}} ->
                    replace(bump([offered, lost], M), St);
                {true, false, {ok, discard}} ->
                    replace(bump([offered, filtered_min], M), St);
                {true, true, {ok, trace}} ->
                    St;
                {true, true, {ok, discard}} ->
                    %% Sampled out (filtered) or a full drop ring (dropped).
                    check(maps:get(sample, M) > 1 orelse maps:get(policy, M) =:= drop,
                          What),
                    replace(bump([offered, ambiguous], M), St);
                _ ->
                    fail(What)
            end
    end.

%%% ---- making rings -------------------------------------------------------------

gen_size() ->
    weighted([{6, 4096}, {3, 8192}, {2, 65536}, {1, 1 bsl 20},
              {2, pick([4095, 4097, 3 * 4096, 0, -4096, 1 bsl 31, 1 bsl 64,
                        1 bsl 200, 4096.0, '4096', <<>>])}]).

gen_tags_opt() ->
    Tags = ctx(tags),
    weighted([{6, lists:usort([pick(Tags) || _ <- lists:seq(1, 5 + rand:uniform(20))])},
              {1, Tags},
              {1, pick([[], [send | x], [foo], [send, foo], send, "send"])}]).

gen_payload() ->
    weighted([{4, full}, {3, none},
              {4, {max_bytes, pick([1, 16, 100, 1000, 70000, 1 bsl 30])}},
              {1, pick([{max_bytes, 0}, {max_bytes, -1}, {max_bytes, 1 bsl 30 + 1},
                        {max_bytes, x}, max_bytes, partial])}]).

%% new/1: options as a map or a list, sometimes with junk.
op_new(St) ->
    Opts0 = [{K, V} || {K, V, P} <- [{size, gen_size(), 0.7}, {policy, pick([drop, overwrite]), 0.6},
                                      {payload, gen_payload(), 0.7}, {tags, gen_tags_opt(), 0.25}],
                       chance(P)],
    Opts1 = case chance(0.1) of
                true -> Opts0 ++ [pick([{colour, red}, {policy, junk}, x, {size}])];
                false -> Opts0
            end,
    Opts = case rand:uniform(8) of
               1 -> Opts1;
               2 -> pick([x, 12, [size | 4096]]);
               _ -> maps:from_list([O || {_, _} = O <- Opts1])
           end,
    Valid = new_opts_valid(Opts),
    case {call(tracekit_ring, new, [Opts]), Valid} of
        {{ok, {ok, R}}, {true, Cfg}} ->
            #{size := S, policy := P, payload := Pl, tags := T} = Cfg,
            add_ring(new_model(R, S, P, Pl, T), St);
        {{ok, {error, {badopt, _}}}, false} ->
            St;
        Other ->
            fail({new_answer, brief(Opts), Other})
    end.

new_opts_valid(Opts) when is_map(Opts) -> new_opts_valid(maps:to_list(Opts));
new_opts_valid(Opts) ->
    Defaults = #{size => 1 bsl 20, policy => drop, payload => full, tags => all},
    try
        Cfg = lists:foldl(fun({K, V}, Acc) when is_map_key(K, Acc) ->
                                  true = option_ok(K, V),
                                  Acc#{K := case K of tags -> lists:usort(V); _ -> V end}
                          end, Defaults, Opts),
        {true, Cfg}
    catch
        error:_ -> false
    end.

option_ok(size, S) -> is_integer(S) andalso S >= 4096 andalso S =< 1 bsl 30
                          andalso S band (S - 1) =:= 0;
option_ok(policy, P) -> P =:= drop orelse P =:= overwrite;
option_ok(payload, full) -> true;
option_ok(payload, none) -> true;
option_ok(payload, {max_bytes, N}) -> is_integer(N) andalso N >= 1 andalso N =< 1 bsl 30;
option_ok(payload, _) -> false;
option_ok(tags, L) -> is_list(L) andalso L =/= [] andalso proper(L) andalso
                          lists:all(fun is_tag/1, L).

%% new_nif(Size, Policy, Payload, MaxBytes, Tags): the raw NIF.
op_new_nif(St) ->
    Size = gen_size(),
    Policy = weighted([{5, drop}, {5, overwrite}, {1, pick([x, "drop", 1])}]),
    Mode = weighted([{4, full}, {3, none}, {4, max_bytes}, {1, pick([{max_bytes, 1}, x, []])}]),
    Max = weighted([{6, pick([0, 1, 100, 5000, 1 bsl 30])},
                    {1, pick([1 bsl 30 + 1, -1, 1 bsl 64, 1.0, x])}]),
    Tags = weighted([{3, true}, {5, gen_tags_opt()}, {1, pick([false, all, 1])}]),
    Valid = option_ok(size, Size) andalso lists:member(Policy, [drop, overwrite])
        andalso lists:member(Mode, [full, none, max_bytes])
        andalso is_integer(Max) andalso Max >= 0 andalso Max =< 1 bsl 30
        andalso (Tags =:= true orelse
                 (is_list(Tags) andalso proper(Tags) andalso lists:all(fun is_tag/1, Tags))),
    case {call(tracekit_ring, new_nif, [Size, Policy, Mode, Max, Tags]), Valid} of
        {{ok, {ok, R}}, true} ->
            Pl = case Mode of max_bytes -> {max_bytes, max(Max, 1)}; _ -> Mode end,
            T = case Tags of true -> all; _ -> lists:usort(Tags) end,
            add_ring(new_model(R, Size, Policy, Pl, T), St);
        {{badarg}, false} ->
            St;
        Other ->
            fail({new_nif_answer, [Size, Policy, Mode, Max, brief(Tags)], Other})
    end.

proper(L) ->
    try length(L) of _ -> true catch error:badarg -> false end.

add_ring(M, St) ->
    St1 = St#{rings := [M | maps:get(rings, St)], made := maps:get(made, St) + 1},
    case length(maps:get(rings, St1)) > ?MAX_RINGS of
        true ->
            Oldest = lists:last(maps:get(rings, St1)),
            drop_ring(Oldest, St1#{rings := lists:droplast(maps:get(rings, St1))});
        false ->
            St1
    end.

%% A ring leaves the fuzz: checked after a last drain, closed (so that a
%% copy of its reference that still finds it acts like any other junk
%% state), and forgotten.
drop_ring(M, St) ->
    M1 = check_ring(M),
    R = maps:get(res, M1),
    {ok, ok} = call(tracekit_ring, close, [R]),
    St#{dead := lists:sublist([term_to_binary(R) | maps:get(dead, St)], 5),
        events := maps:get(events, St) + maps:get(drained, M1)}.

%%% ---- settings -------------------------------------------------------------------

gen_config() ->
    L = [{K, V} || {K, V} <- [{paused, weighted([{4, false}, {1, true}, {1, pick([x, 1])}])},
                              {tags, weighted([{5, all}, {2, gen_tags_opt()}])},
                              {sample, weighted([{4, 1}, {2, pick([2, 3, 7])},
                                                 {1, pick([0, -1, 1 bsl 32, 1 bsl 32 - 1, 1.0])}])}],
                   chance(0.5)],
    case rand:uniform(10) of
        1 -> pick([x, [{paused, true}], 3]);
        2 -> maps:from_list([{colour, red} | L]);
        _ -> maps:from_list(L)
    end.

config_valid(Config) when is_map(Config) ->
    lists:all(fun({paused, P}) -> is_boolean(P);
                 ({tags, all}) -> true;
                 ({tags, T}) -> option_ok(tags, T);
                 ({sample, S}) -> is_integer(S) andalso S >= 1 andalso S < 1 bsl 32;
                 (_) -> false
              end, maps:to_list(Config));
config_valid(_) ->
    false.

apply_config(Config, M) ->
    maps:fold(fun(paused, P, Acc) -> Acc#{paused := P};
                 (tags, all, Acc) -> Acc#{tags := all};
                 (tags, T, Acc) -> Acc#{tags := lists:usort(T)};
                 (sample, S, Acc) -> Acc#{sample := S}
              end, M, Config).

op_set(St) ->
    State = gen_state(St),
    Config = gen_config(),
    M = ring_of(State, maps:get(rings, St)),
    case {call(tracekit_ring, set, [State, Config]), config_valid(Config), M} of
        {{ok, ok}, true, #{}} -> replace(apply_config(Config, M), St);
        {{badarg}, true, none} -> St;
        {{ok, {error, {badopt, _}}}, false, _} -> St;
        Other -> fail({set_answer, brief(State), Config, Other})
    end.

op_set_nif(St) ->
    State = gen_state(St),
    Paused = weighted([{3, undefined}, {1, true}, {3, false}, {1, x}]),
    Tags = weighted([{4, undefined}, {3, true}, {2, gen_tags_opt()}, {1, []}]),
    Sample = weighted([{3, undefined}, {3, pick([1, 2, 5])},
                       {1, pick([0, -1, 1 bsl 32, 1 bsl 32 - 1, x])}]),
    M = ring_of(State, maps:get(rings, St)),
    Valid = M =/= none andalso lists:member(Paused, [undefined, true, false])
        andalso (Tags =:= undefined orelse Tags =:= true orelse
                 (is_list(Tags) andalso proper(Tags) andalso lists:all(fun is_tag/1, Tags)))
        andalso (Sample =:= undefined orelse
                 (is_integer(Sample) andalso Sample >= 1 andalso Sample < 1 bsl 32)),
    case {call(tracekit_ring, set_nif, [State, Paused, Tags, Sample]), Valid} of
        {{ok, ok}, true} ->
            M1 = case Paused of undefined -> M; _ -> M#{paused := Paused} end,
            M2 = case Tags of undefined -> M1; true -> M1#{tags := all};
                     _ -> M1#{tags := lists:usort(Tags)} end,
            M3 = case Sample of undefined -> M2; _ -> M2#{sample := Sample} end,
            replace(M3, St);
        {{badarg}, false} ->
            St;
        Other ->
            fail({set_nif_answer, [brief(State), Paused, brief(Tags), Sample], Other})
    end.

%%% ---- drain, stats, close ----------------------------------------------------------

op_drain(St) ->
    State = gen_state(St),
    M = ring_of(State, maps:get(rings, St)),
    Max = weighted([{6, pick([1, 2, 7, 100, 4000, 5000])},
                    {1, pick([0, -1, 1 bsl 63, 1 bsl 64, 1 bsl 70, x, 1.0])}]),
    MaxOk = is_integer(Max) andalso Max >= 1 andalso Max < 1 bsl 64,
    {F, Args, Valid, Limit} =
        case rand:uniform(4) of
            1 -> {drain_chunk, [State, Max], MaxOk, min(Max, 4000)};
            2 -> {drain, [State, Max], MaxOk, Max};
            3 -> {drain, [State], true, infinity};
            4 -> {drain_all, [State], true, infinity}
        end,
    case {call(tracekit_ring, F, Args), Valid andalso M =/= none} of
        {{ok, Evs}, true} when is_list(Evs) ->
            check(Limit =:= infinity orelse length(Evs) =< Limit,
                  {drain_limit, F, Max, length(Evs)}),
            replace(take_events(Evs, M), St);
        {{badarg}, false} ->
            St;
        Other ->
            fail({drain_answer, F, brief(Args), brief(Other)})
    end.

op_stats(St) ->
    State = gen_state(St),
    M = ring_of(State, maps:get(rings, St)),
    case {call(tracekit_ring, stats, [State]), M} of
        {{ok, S}, #{}} when is_map(S) -> check_stats(S, M, false), St;
        {{badarg}, none} -> St;
        Other -> fail({stats_answer, brief(State), Other})
    end.

op_close(St) ->
    State = gen_state(St),
    M = ring_of(State, maps:get(rings, St)),
    case {call(tracekit_ring, close, [State]), M} of
        {{ok, ok}, #{}} -> replace(M#{closed := true}, St);
        {{badarg}, none} -> St;
        Other -> fail({close_answer, brief(State), Other})
    end.

op_misc(St) ->
    Live = length(maps:get(rings, St)),
    {ok, Alive} = call(tracekit_ring, alive, []),
    check(is_integer(Alive) andalso Alive >= Live, {alive, Alive, Live}),
    {ok, Tags} = call(tracekit_ring, tags, []),
    check(Tags =:= ctx(tags), {tags, Tags}),
    {ok, L} = call(tracekit_ring, limits, []),
    check(is_map(L) andalso lists:sort(maps:keys(L)) =:=
              [drain_chunk, max_bytes, max_size, memory, min_size, schedulers]
          andalso lists:all(fun(V) -> is_integer(V) andalso V > 0 end, maps:values(L)),
          {limits, L}),
    St.

%% Drained events: each must be the next expected event still pending
%% (skipping those the ring dropped or overwrote), in order.
take_events(Evs, M) ->
    Q = lists:foldl(fun(Ev, Q0) -> match_event(Ev, Q0, Q0, M) end,
                    maps:get(pending, M), Evs),
    M#{pending := Q, drained := maps:get(drained, M) + length(Evs)}.

match_event(Ev, Q0, Pending, M) ->
    case queue:out(Q0) of
        {empty, _} ->
            %% The whole terms, for a closer look: binary_to_term of the file.
            First = lists:sublist(queue:to_list(Pending), 3),
            Dump = filename:absname("fuzz_unmatched_event.bin"),
            ok = file:write_file(Dump, term_to_binary({Ev, First})),
            fail({drained_event_not_offered, brief(Ev),
                  #{ring => maps:without([res, pending], M), dump => Dump,
                    pending => [brief(E) || E <- First]}});
        {{value, E}, Q1} ->
            case matches(E, Ev) of
                true ->
                    whole_event(E) andalso put(fuzz_whole, get_int(fuzz_whole) + 1),
                    Q1;
                false -> match_event(Ev, Q1, Pending, M)
            end
    end.

whole_event({_, Parts}) ->
    lists:all(fun({term, _, X}) -> X =/= undefined; (_) -> true end, Parts).

get_int(K) ->
    case get(K) of undefined -> 0; N -> N end.

%% Drains the ring to the end and checks everything the model knows.
check_ring(M) ->
    M1 = drain_to_end(M, 0),
    {ok, S} = call(tracekit_ring, stats, [maps:get(res, M1)]),
    check_stats(S, M1, true),
    M1.

drain_to_end(M, N) when N > 50 -> fail({drain_never_ends, maps:get(id, M)});
drain_to_end(M, N) ->
    case call(tracekit_ring, drain_all, [maps:get(res, M)]) of
        {ok, []} -> M;
        {ok, Evs} -> drain_to_end(take_events(Evs, M), N + 1)
    end.

check_stats(S, M, Drained) ->
    #{written := W, dropped := D, filtered := F, overwritten := O,
      drained := Dr, undecodable := U, buffered := B, truncated := T} = S,
    #{offered := Off, filtered_min := Fmin, ambiguous := A, lost := L,
      eligible := E, policy := P} = M,
    What = {stats, maps:get(id, M), S, maps:without([pending, res], M)},
    check(U =:= 0 andalso Dr =:= maps:get(drained, M)
          andalso W + D + F =:= Off
          andalso F >= Fmin andalso F =< Fmin + A andalso D >= L
          andalso T =< Off andalso W =< E
          andalso (P =:= drop orelse W =:= E)
          andalso (P =:= overwrite orelse O =:= 0)
          andalso maps:get(size, S) =:= maps:get(size, M)
          andalso maps:get(policy, S) =:= P
          andalso maps:get(closed, S) =:= maps:get(closed, M)
          andalso maps:get(paused, S) =:= maps:get(paused, M)
          andalso maps:get(sample, S) =:= maps:get(sample, M)
          andalso tag_set(maps:get(tags, S)) =:= tag_set(maps:get(tags, M)), What),
    Drained =:= false orelse
        check(B =:= 0 andalso W =:= Dr + O, What).

tag_set(all) -> all;
tag_set(L) -> lists:usort(L).

%%% ---- the expected events ------------------------------------------------------------

%% What a ring records for trace(Tag, _, Tracee, Msg, Opts): the event's
%% first element, then its parts, each the term as the payload mode keeps
%% it ({term, Kept, Exact}: Exact is the decoded term when the record
%% certainly has room for everything, else undefined).
expect(Tag, Tracee, Msg, Opts, M) ->
    Mode = maps:get(mode, M),
    {Extra, Msr, Sched, Ts} = read_opts(Opts),
    Seq = Tag =:= seq_trace,
    Kept = [Tracee, keep_msg(Mode, Tag, Msg)]
        ++ [keep_extra(Mode, Tag, X) || {X} <- [Extra]]
        ++ [user(Mode, X) || {X} <- [Msr]]
        ++ [X || {X} <- [Sched]],
    %% The record certainly has room for everything when twice the terms'
    %% size fits (the extra term may take half of what is left).
    Room = maps:get(size, M) div 4 - 16,
    Whole = (Mode =:= full orelse Mode =:= none)
        andalso 2 * lists:sum([est(K) || K <- Kept]) + 128 =< Room,
    Terms = [{term, K, whole(Whole, K)} || K <- Kept],
    [TraceeP, MsgP | Rest] = Terms,
    First = if Seq -> seq_trace; Ts =/= none -> trace_ts; true -> trace end,
    {First, [TraceeP] ++ [{tag, Tag} || not Seq] ++ [MsgP | Rest]
                      ++ [{ts, Ts} || Ts =/= none]}.

%% The decoded term when the record keeps K whole (containers beyond the
%% depth rule aside), else undefined: then only the consistency of what
%% was kept is checked.
whole(false, _) -> undefined;
whole(true, K) ->
    try cut_deep(K, 0)
    catch throw:map_keys_merged -> undefined
    end.

%% User data as the mode keeps it: whole (full), the marker (none), or
%% within a budget ({max_bytes, N}: checked for consistency only).
user(full, X) -> X;
user(none, _) -> '...';
user({max_bytes, _}, X) -> {'$budget', X}.

part(Tag) ->
    case Tag of
        _ when Tag =:= send; Tag =:= send_to_non_existing_process;
               Tag =:= 'receive'; Tag =:= exit; Tag =:= closed -> msg;
        call -> args;
        return_from -> extra;
        exception_from -> exc;
        _ when Tag =:= spawn; Tag =:= spawned -> spawn;
        seq_trace -> seq;
        _ -> none
    end.

keep_msg(full, _, Msg) -> Msg;
keep_msg(Mode, Tag, Msg) ->
    case {part(Tag), Msg} of
        {msg, _} -> user(Mode, Msg);
        {args, _} -> keep_mfa(Mode, Msg);
        {seq, T} when is_tuple(T), tuple_size(T) >= 2 ->
            setelement(tuple_size(T), T, user(Mode, element(tuple_size(T), T)));
        _ -> Msg
    end.

keep_extra(full, _, X) -> X;
keep_extra(Mode, Tag, X) ->
    case {part(Tag), X} of
        {extra, _} -> user(Mode, X);
        {spawn, _} -> keep_mfa(Mode, X);
        {exc, T} when is_tuple(T), tuple_size(T) >= 2 ->
            [C | Vs] = tuple_to_list(T),
            list_to_tuple([C | [user(Mode, V) || V <- Vs]]);
        _ -> X
    end.

%% {M, F, Args}: the arguments' count (none) or the arguments within the
%% budget; anything else whole.
keep_mfa(Mode, {Mod, F, Args} = T) ->
    case is_list(Args) andalso proper(Args) of
        true when Mode =:= none -> {Mod, F, length(Args)};
        true -> {Mod, F, user(Mode, Args)};
        false -> T
    end;
keep_mfa(_, T) ->
    T.

%% A term as a record keeps it when there is room: containers nested
%% deeper than the rule allows become the marker.
cut_deep(T, D) when is_list(T), T =/= [] ->
    case D >= ?MAX_DEPTH of
        true -> '...';
        false -> cut_list(T, D + 1)
    end;
cut_deep(T, D) when is_tuple(T) ->
    case D >= ?MAX_DEPTH of
        true -> '...';
        false -> list_to_tuple([cut_deep(E, D + 1) || E <- tuple_to_list(T)])
    end;
cut_deep(T, D) when is_map(T) ->
    case D >= ?MAX_DEPTH of
        true -> '...';
        false ->
            M = maps:from_list([{cut_deep(K, D + 1), cut_deep(V, D + 1)}
                                || {K, V} <- maps:to_list(T)]),
            map_size(M) =:= map_size(T) orelse throw(map_keys_merged),
            M
    end;
cut_deep(T, _) ->
    T.

cut_list([H | T], D) -> [cut_deep(H, D) | cut_list(T, D)];
cut_list([], _) -> [];
cut_list(Tail, D) -> cut_deep(Tail, D).

%% An upper bound of a term's size in a record (tk_term.h).
est(T) when is_atom(T); is_float(T) -> 9;
est(T) when is_integer(T), T >= -(1 bsl 63), T < 1 bsl 63 -> 9;
est(T) when is_binary(T) -> 5 + byte_size(T);
est([]) -> 1;
est(T) when is_list(T) -> 5 + est_list(T, 0);
est(T) when is_tuple(T) -> 5 + lists:sum([est(E) || E <- tuple_to_list(T)]);
est(T) when is_map(T) -> 5 + lists:sum([est(K) + est(V) || {K, V} <- maps:to_list(T)]);
est(T) when is_pid(T); is_port(T) ->
    case node(T) =:= node() of
        true -> 9;
        false -> 5 + erlang:external_size(T)
    end;
est(T) -> 5 + erlang:external_size(T).

est_list([H | T], Acc) -> est_list(T, Acc + est(H));
est_list([], Acc) -> Acc + 1;
est_list(Tail, Acc) -> Acc + est(Tail).

%% Whether a drained event is the expected one.
matches({First, Parts}, Ev) ->
    is_tuple(Ev) andalso tuple_size(Ev) =:= length(Parts) + 1
        andalso element(1, Ev) =:= First
        andalso parts_match(Parts, tl(tuple_to_list(Ev))).

parts_match(Parts, Els) ->
    Whole = whole_event({x, Parts}),
    lists:all(fun({{tag, T}, El}) -> El =:= T;
                 ({{ts, K}, El}) -> ts_ok(K, El) orelse (not Whole andalso ts_cut(K, El));
                 ({{term, _, X}, El}) when X =/= undefined -> El =:= X;
                 ({{term, K, undefined}, El}) -> consistent(K, El, 0, false)
              end, lists:zip(Parts, Els)).

ts_ok(monotonic, T) -> is_integer(T);
ts_ok(strict_monotonic, {M, U}) -> is_integer(M) andalso is_integer(U);
ts_ok(K, {Mega, S, Micro}) when K =:= timestamp; K =:= cpu_timestamp ->
    lists:all(fun(I) -> is_integer(I) andalso I >= 0 end, [Mega, S, Micro]);
ts_ok(_, _) -> false.

%% A timestamp that met a record with no room left: the marker, or its
%% tuple with the elements that did not fit as markers.
ts_cut(_, '...') -> true;
ts_cut(strict_monotonic, {_, _} = T) -> ts_elements(T);
ts_cut(K, {_, _, _} = T) when K =:= timestamp; K =:= cpu_timestamp -> ts_elements(T);
ts_cut(_, _) -> false.

ts_elements(T) ->
    lists:all(fun(E) -> is_integer(E) orelse E =:= '...' end, tuple_to_list(T)).

%% Whether G is what a record may keep of O at depth D when room or a
%% budget (B) runs short: the marker anywhere, a binary's prefix, a list's
%% first elements, a fun by its name (budget), the rest as it was.
consistent(_, '...', _, _) -> true;
consistent({'$budget', O}, G, D, _) -> consistent(O, G, D, true);
consistent(O, G, D, B) when is_list(O), O =/= [] ->
    D < ?MAX_DEPTH andalso is_list(G) andalso G =/= [] andalso
        consistent_list(O, G, D + 1, B);
consistent(O, G, D, B) when is_tuple(O) ->
    D < ?MAX_DEPTH andalso is_tuple(G) andalso tuple_size(G) =:= tuple_size(O)
        andalso lists:all(fun({X, Y}) -> consistent(X, Y, D + 1, B) end,
                          lists:zip(tuple_to_list(O), tuple_to_list(G)));
consistent(O, G, D, _) when is_map(O) ->
    D < ?MAX_DEPTH andalso is_map(G) andalso map_size(G) =< map_size(O);
consistent(O, G, _, _) when is_binary(O) ->
    G =:= O orelse
        case G of
            {'...', P, N} when is_binary(P), N =:= byte_size(O), byte_size(P) < N ->
                binary:longest_common_prefix([O, P]) =:= byte_size(P);
            _ -> false
        end;
consistent(O, G, _, true) when is_function(O) ->
    G =:= O orelse
        case G of
            {'...', 'fun', Name} -> is_binary(Name);
            _ -> false
        end;
consistent(O, G, _, _) ->
    G =:= O.

consistent_list(_, '...', _, _) -> true;
consistent_list([], G, _, _) -> G =:= [];
consistent_list([H | T], [GH | GT], D, B) ->
    consistent(H, GH, D, B) andalso consistent_list(T, GT, D, B);
consistent_list([_ | _], _, _, _) -> false;
consistent_list(Tail, G, D, B) -> consistent(Tail, G, D, B).

%%% ==== tracekit_count =========================================================

count_fuzz_run(N) ->
    %% The context's counter turns up as a random term too.
    Ctx = #{res => ctx(counter), closed => false, counts => #{}},
    St = until_all_called(tracekit_count, fun(S) -> count_loop(100, S) end,
                          count_loop(N, #{counters => [Ctx], calls => 0, counted => 0})),
    [check_counter(C) || C <- maps:get(counters, St)],
    (maps:with([calls, counted], St))#{not_called => not_called(tracekit_count)}.

count_loop(0, St) -> St;
count_loop(N, St0) ->
    St = St0#{calls := maps:get(calls, St0) + 1},
    Cs = maps:get(counters, St),
    St1 = case Cs =:= [] orelse chance(0.03) of
              true ->
                  {ok, {ok, C}} = call(tracekit_count, new, []),
                  St#{counters := [#{res => C, closed => false, counts => #{}} | Cs]};
              false ->
                  count_op(weighted([{50, trace}, {25, enabled}, {5, read},
                                     {2, reset}, {2, close}]), St)
          end,
    count_loop(N - 1, St1).

counter_state(St) ->
    Cs = maps:get(counters, St),
    case rand:uniform(10) of
        N when N =< 6 -> maps:get(res, pick(Cs));
        7 -> binary_to_term(term_to_binary(maps:get(res, pick(Cs))));
        8 -> pick([ring_for_count(), ctx(atomics)]);
        _ -> pick([undefined, self(), make_ref(), 1, leaf()])
    end.

%% A ring as a wrong state for tracekit_count (made on first use).
ring_for_count() ->
    case get(count_ring) of
        undefined -> {ok, R} = tracekit_ring:new(#{size => 4096}), put(count_ring, R), R;
        R -> R
    end.

counter_of(S, St) ->
    case [C || C <- maps:get(counters, St), maps:get(res, C) =:= S] of
        [C] -> C;
        [] -> none
    end.

replace_counter(C, St) ->
    R = maps:get(res, C),
    St#{counters := [case maps:get(res, X) =:= R of true -> C; false -> X end
                     || X <- maps:get(counters, St)]}.

count_op(trace, St) ->
    Tag = gen_tag(),
    S = counter_state(St),
    Args = [Tag, S, gen_tracee(), gen_msg(Tag), gen_opts(Tag)],
    R = call(tracekit_count, trace, Args),
    check(R =:= {ok, ok}, {count_trace_answer, R}),
    case counter_of(S, St) of
        #{closed := false, counts := Counts} = C ->
            case is_tag(Tag) of
                true ->
                    C1 = C#{counts := maps:update_with(Tag, fun(V) -> V + 1 end, 1, Counts)},
                    replace_counter(C1, St#{counted := maps:get(counted, St) + 1});
                false ->
                    St
            end;
        _ ->
            St
    end;
count_op(enabled, St) ->
    Tag = case chance(0.15) of true -> trace_status; false -> gen_tag() end,
    S = counter_state(St),
    R = call(tracekit_count, enabled, [Tag, S, gen_tracee()]),
    Expected = case counter_of(S, St) of
                   #{closed := false} -> trace;
                   _ when Tag =:= trace_status -> remove;
                   _ -> discard
               end,
    check(R =:= {ok, Expected}, {count_enabled_answer, Tag, R, Expected}),
    St;
count_op(read, St) ->
    S = counter_state(St),
    case {call(tracekit_count, read, [S]), counter_of(S, St)} of
        {{ok, Map}, #{counts := Counts}} ->
            check(Map =:= Counts, {count_read, Map, Counts}), St;
        {{badarg}, none} -> St;
        Other -> fail({count_read_answer, Other})
    end;
count_op(reset, St) ->
    S = counter_state(St),
    case {call(tracekit_count, reset, [S]), counter_of(S, St)} of
        {{ok, ok}, #{} = C} -> replace_counter(C#{counts := #{}}, St);
        {{badarg}, none} -> St;
        Other -> fail({count_reset_answer, Other})
    end;
count_op(close, St) ->
    S = counter_state(St),
    case {call(tracekit_count, close, [S]), counter_of(S, St)} of
        {{ok, ok}, #{} = C} -> replace_counter(C#{closed := true}, St);
        {{badarg}, none} -> St;
        Other -> fail({count_close_answer, Other})
    end.

check_counter(#{res := C, counts := Counts}) ->
    {ok, Map} = call(tracekit_count, read, [C]),
    check(Map =:= Counts, {count_final, Map, Counts}).

%%% ==== seq_order/1, and every NIF the cases do not know ========================

nif_fuzz_run(N) ->
    Generic = generic_nifs(),
    Tracers = file_tracers(),
    St0 = #{orders => 0, badargs => 0, seeds => initial_pool() ++ [F || {_, F} <- Tracers],
            pool => [], generic => 0},
    St = lists:foldl(fun(_, Acc) ->
                             case Generic =/= [] andalso chance(0.3) of
                                 true -> generic_call(pick(Generic), Acc);
                                 false -> seq_order_call(Acc)
                             end
                     end, St0, lists:seq(1, N)),
    %% Each generic NIF at least a few times, whatever the draw.
    St1 = lists:foldl(fun(F, Acc) ->
                              lists:foldl(fun(_, A) -> generic_call(F, A) end,
                                          Acc, lists:seq(1, 20))
                      end, St, Generic),
    Read = read_back(Tracers),
    NotCalled = [{M, F, A} || {M, F, A} <- [{seq_module(), seq_order, 1} | Generic],
                              get({fuzz_called, M, F, A}) =/= true],
    (maps:with([orders, badargs, generic], St1))#{file_events => Read,
                                                 not_called => NotCalled}.

%% Trace files written by tracekit_file (when the application has it), as
%% states for its callbacks among the random arguments.
file_tracers() ->
    case maps:is_key(tracekit_file, get(fuzz_nifs)) of
        false -> [];
        true ->
            [{Path, F} || {Path, Opts} <- [{"fuzz_trace.tkt", #{buffer => 4096}},
                                           {"fuzz_none.tkt", #{buffer => 65536, payload => none}}],
                          {ok, F} <- [tracekit_file:new(Opts#{path => Path})]]
    end.

%% What the callbacks wrote reads back as well-formed events.
read_back(Tracers) ->
    lists:sum(
      [begin
           _ = tracekit_file:close(F),
           case tracekit_file:read(Path) of
               {ok, Evs} when is_list(Evs) ->
                   [check(well_formed(Ev), {trace_file_event, Path, brief(Ev)}) || Ev <- Evs],
                   length(Evs);
               Other ->
                   fail({trace_file_read_back, Path, brief(Other)})
           end
       end || {Path, F} <- Tracers]).

seq_order_call(St) ->
    {Events, Valid} = gen_seq_events(),
    case {call(seq_module(), seq_order, [Events]), Valid} of
        {{ok, Order}, true} ->
            check_order(Events, Order),
            St#{orders := maps:get(orders, St) + 1};
        {{badarg}, false} ->
            St#{badargs := maps:get(badargs, St) + 1};
        Other ->
            fail({seq_order_answer, brief(Events), brief(Other)})
    end.

gen_seq_events() ->
    N = case chance(0.003) of
            true -> 2000;
            false -> rand:uniform(40) - 1
        end,
    Evs = [seq_event() || _ <- lists:seq(1, N)],
    case rand:uniform(8) of
        1 when N > 0 ->
            %% One bad element.
            I = rand:uniform(N),
            {Before, [E | After]} = lists:split(I - 1, Evs),
            {Before ++ [spoil(E) | After], false};
        2 -> {pick([x, [x], [{send} | x], {}, <<>>]), false};
        3 when N > 0 -> {Evs ++ improper_end, false};
        _ -> {Evs, true}
    end.

seq_event() ->
    {pick([send, 'receive', print]), rand:uniform(3) - 1,
     pick([-1, 0, rand:uniform(20), 16 * rand:uniform(20) + 15, -(1 bsl 63), 1 bsl 63 - 1]),
     pick([rand:uniform(20), 0, -(1 bsl 63), 1 bsl 63 - 1]),
     rand:uniform(5) - 1, pick([-1, -(1 bsl 31), 1 bsl 31 - 1, rand:uniform(5) - 1]),
     pick([0, 1, 2, 1 bsl 32 - 1]), pick([true, false])}.

spoil(E) ->
    case rand:uniform(7) of
        1 -> setelement(1, E, pick([sent, x, 1]));
        2 -> setelement(2, E, pick([-1, 1 bsl 32, x]));
        3 -> setelement(3, E, pick([1 bsl 63, 1.5]));
        4 -> setelement(6, E, pick([1 bsl 31, -(1 bsl 31) - 1]));
        5 -> setelement(8, E, pick([yes, 1]));
        6 -> erlang:delete_element(8, E);
        7 -> pick([x, [], [E]])
    end.

%% The answer is a permutation of the input positions, each with a match
%% that is symmetric and pairs a send with the receive of the same
%% transfer.
check_order(Events, Order) ->
    N = length(Events),
    check(is_list(Order) andalso length(Order) =:= N, {order_length, N, brief(Order)}),
    Idx = [I || {I, _} <- Order],
    check(lists:sort(Idx) =:= lists:seq(0, N - 1), {order_not_a_permutation, brief(Order)}),
    Match = maps:from_list(Order),
    Ev = list_to_tuple(Events),
    maps:foreach(
      fun(_, -1) -> ok;
         (I, J) ->
              check(is_integer(J) andalso J >= 0 andalso J < N
                    andalso maps:get(J, Match) =:= I, {match_not_symmetric, I, J}),
              {K1, L1, C1, S1, F1, _, M1, _} = element(I + 1, Ev),
              {K2, L2, C2, S2, F2, _, M2, _} = element(J + 1, Ev),
              check(lists:sort([K1, K2]) =:= ['receive', send]
                    andalso {L1, C1, S1, F1, M1} =:= {L2, C2, S2, F2, M2},
                    {bad_match, element(I + 1, Ev), element(J + 1, Ev)})
      end, Match).

%% Arguments for NIFs the cases know nothing of: resources of every kind
%% (and those such NIFs return), paths of files of random bytes, anything.
initial_pool() ->
    {ok, R} = tracekit_ring:new(#{size => 4096}),
    Files = [begin
                 F = "fuzz_file_" ++ integer_to_list(I),
                 ok = file:write_file(F, rand:bytes(pick([0, 10, 100, 5000]))),
                 F
             end || I <- lists:seq(1, 4)],
    [R, ctx(counter), ctx(atomics), self(), "/dev/null", <<"/">>, <<>>, "nonexistent",
     send, call, seq_trace, true, 0, 4096, full, none, drop, overwrite]
        ++ Files ++ [list_to_binary(F) || F <- Files].

generic_call({M, F, A}, St) ->
    Pool = maps:get(seeds, St) ++ maps:get(pool, St),
    Arg = fun() -> case chance(0.5) of true -> pick(Pool); false -> any_term() end end,
    Name = atom_to_list(F),
    %% A tracer module's callbacks get tracer-shaped arguments, and must
    %% answer as erl_tracer says.
    {Args, Answers} =
        case {lists:prefix("enabled", Name), lists:prefix("trace", Name), A} of
            {true, _, 3} ->
                {[pick([trace_status, gen_tag()]), Arg(), gen_tracee()],
                 [trace, discard, remove]};
            {_, true, 5} ->
                Tag = gen_tag(),
                {[Tag, Arg(), gen_tracee(), gen_msg(Tag), gen_opts(Tag)], [ok]};
            _ ->
                {[Arg() || _ <- lists:seq(1, A)], any}
        end,
    Pool1 = case call(M, F, Args) of
                {ok, V} ->
                    check(Answers =:= any orelse lists:member(V, Answers),
                          {callback_answer, M, F, brief(V)}),
                    lists:sublist(refs_in(V) ++ maps:get(pool, St), 30);
                _ ->
                    maps:get(pool, St)
            end,
    St#{pool := Pool1, generic := maps:get(generic, St) + 1}.

refs_in(V) when is_reference(V) -> [V];
refs_in(V) when is_tuple(V), tuple_size(V) =< 4 -> lists:append([refs_in(E) || E <- tuple_to_list(V)]);
refs_in(_) -> [].

%%% ==== many processes on shared rings ===========================================

%% Writers call the callbacks on shared rings while a drainer drains them
%% and a setter changes their settings; part of each writer's events carry
%% its own sequence numbers, which must come out in order. Every event is
%% counted once, every drained event is well formed.
concurrent_run(N) ->
    Specs = [{4096, drop, full}, {65536, overwrite, {max_bytes, 300}},
             {8192, overwrite, none}, {1 bsl 20, drop, full}],
    Rings = [begin {ok, R} = tracekit_ring:new(#{size => S, policy => P, payload => Pl}), R end
             || {S, P, Pl} <- Specs],
    Self = self(),
    Adopt = inherit(),
    Writers = 4,
    PerWriter = max(200, N div Writers),
    Drainer = spawn_link(fun() -> Adopt(100), drainer(Rings, #{}) end),
    Setter = spawn_link(fun() -> Adopt(200), setter(Rings) end),
    Ws = [spawn_link(fun() -> Adopt(I),
                              Self ! {done, self(), writer(I, Rings, PerWriter, #{})}
                     end) || I <- lists:seq(1, Writers)],
    Offered = lists:foldl(fun(W, Acc) ->
                                  receive {done, W, O} ->
                                          maps:merge_with(fun(_, A, B) -> A + B end, Acc, O)
                                  end
                          end, #{}, Ws),
    Setter ! {stop, self()},
    receive {stopped, Setter} -> ok end,
    Drainer ! {stop, self()},
    Drained0 = receive {drained, Drainer, D} -> D end,
    Results = [concurrent_check(R, maps:get(R, Offered, 0),
                                lists:append(lists:reverse(maps:get(R, Drained0, [])))
                                ++ tracekit_ring:drain(R))
               || R <- Rings],
    #{events => lists:sum([E || {E, _} <- Results]),
      ordered => lists:sum([O || {_, O} <- Results])}.

writer(_, _, 0, Offered) -> Offered;
writer(I, Rings, N, Offered) ->
    R = pick(Rings),
    {EnabledF, TraceF} = pick(callbacks()),
    Tag = case chance(0.05) of true -> gen_tag_plain(); false -> pick([send, 'receive', call, exit, seq_trace]) end,
    Count = case chance(0.2) of
                true ->
                    {ok, A} = call(tracekit_ring, EnabledF, [Tag, R, self()]),
                    true = lists:member(A, [trace, discard]),
                    A =:= discard;
                false ->
                    Tracee = case chance(0.5) of
                                 true -> {fuzz_writer, I, N};
                                 false -> term(rand:uniform(20))
                             end,
                    Opts = case chance(0.5) of
                               true -> #{timestamp => pick(?TS_KINDS)};
                               false -> #{}
                           end,
                    {ok, ok} = call(tracekit_ring, TraceF, [Tag, R, Tracee, term(rand:uniform(30)), Opts]),
                    true
            end,
    Offered1 = case Count of
                   true -> maps:update_with(R, fun(V) -> V + 1 end, 1, Offered);
                   false -> Offered
               end,
    writer(I, Rings, N - 1, Offered1).

gen_tag_plain() -> pick([foo, {send}, 1, <<"send">>]).

%% Drains while the writers run; per ring, the chunks newest first.
drainer(Rings, Acc) ->
    receive
        {stop, From} -> From ! {drained, self(), Acc}
    after 0 ->
            R = pick(Rings),
            Evs = case rand:uniform(3) of
                      1 -> tracekit_ring:drain(R);
                      _ -> tracekit_ring:drain(R, rand:uniform(50))
                  end,
            drainer(Rings, maps:update_with(R, fun(L) -> [Evs | L] end, [Evs], Acc))
    end.

setter(Rings) ->
    receive
        {stop, From} ->
            [ok = tracekit_ring:set(R, #{paused => false, tags => all, sample => 1}) || R <- Rings],
            From ! {stopped, self()}
    after 1 ->
            R = pick(Rings),
            Config = maps:from_list([KV || KV <- [{paused, chance(0.3)},
                                                  {tags, pick([all, [send], [send, call, exit]])},
                                                  {sample, pick([1, 1, 2, 3])}],
                                           chance(0.5)]),
            ok = tracekit_ring:set(R, Config),
            setter(Rings)
    end.

concurrent_check(R, Offered, Evs) ->
    [] = tracekit_ring:drain(R),
    S = tracekit_ring:stats(R),
    #{written := W, dropped := D, filtered := F, overwritten := O,
      drained := Dr, undecodable := U, buffered := B} = S,
    check(U =:= 0 andalso B =:= 0 andalso W + D + F =:= Offered
          andalso Dr =:= length(Evs) andalso W =:= Dr + O,
          {concurrent_stats, S, Offered, length(Evs)}),
    [check(well_formed(Ev), {malformed_event, brief(Ev)}) || Ev <- Evs],
    %% Each writer's numbered events in the order it made them (its
    %% count goes down).
    Numbered = [{I, K} || Ev <- Evs, {fuzz_writer, I, K} <- [element(2, Ev)]],
    lists:foreach(fun(I) ->
                          Ks = [K || {J, K} <- Numbered, J =:= I],
                          check(Ks =:= lists:reverse(lists:usort(Ks))
                                andalso length(Ks) =:= length(lists:usort(Ks)),
                                {writer_out_of_order, I, Ks})
                  end, lists:usort([I || {I, _} <- Numbered])),
    {length(Evs), length(Numbered)}.

well_formed(Ev) when is_tuple(Ev), tuple_size(Ev) >= 3 ->
    case element(1, Ev) of
        seq_trace -> tuple_size(Ev) =< 7;
        T when T =:= trace; T =:= trace_ts ->
            tuple_size(Ev) >= 4 andalso tuple_size(Ev) =< 8
                andalso is_tag(element(3, Ev)) andalso element(3, Ev) =/= seq_trace
                andalso (T =:= trace orelse ts_any(element(tuple_size(Ev), Ev)));
        _ -> false
    end;
well_formed(_) -> false.

%% A timestamp of some kind, maybe cut (a tracee took the room).
ts_any(Ts) -> lists:any(fun(K) -> ts_ok(K, Ts) orelse ts_cut(K, Ts) end, ?TS_KINDS).

%%% ==== the fixed bugs, every run ===============================================

%% trace/5 called directly with a tracee that fills the 64 KiB encoding
%% buffer, a timestamp and a big extra (once a buffer overflow), for every
%% timestamp kind, callback and tracee size around the buffer's size.
big_tracee_run() ->
    Tracees = [binary:copy(<<1>>, S) || S <- [65536 - 64, 65536 - 16, 65536, 65537,
                                               100000, 300000]],
    Extras = {binary:copy(<<7>>, 4000000), binary:copy(<<8>>, 70000), x},
    Msr = binary:copy(<<9>>, 70000),
    {ok, R} = tracekit_ring:new(),
    {ok, Small} = tracekit_ring:new(#{size => 4096, policy => overwrite}),
    %% The call of the report, then every callback, timestamp kind and
    %% tracee size, with other fields or without.
    First = {R, trace, binary:copy(<<1>>, 100000),
             #{extra => binary:copy(<<7>>, 4000000), timestamp => monotonic}},
    Calls = [First | [{Ring, F, T, maps:merge(#{timestamp => Ts, extra => pick(Extras)},
                                               pick([#{}, #{scheduler_id => 1, match_spec_result => Msr}]))}
                      || Ring <- [R, Small], {_, F} <- callbacks(), T <- Tracees,
                         Ts <- ?TS_KINDS]],
    Events = lists:foldl(
               fun({Ring, F, Tracee, Opts}, Acc) ->
                       {ok, ok} = call(tracekit_ring, F, [send, Ring, Tracee, x, Opts]),
                       Size = maps:get(size, tracekit_ring:stats(Ring)),
                       Got = tracekit_ring:drain(Ring),
                       E = expect(send, Tracee, x, Opts, model_of(Ring, Size)),
                       check(length(Got) =:= 1 andalso matches(E, hd(Got)),
                             {big_tracee_event, F, byte_size(Tracee), brief(Opts),
                              [brief(G) || G <- Got]}),
                       Acc + 1
               end, 0, Calls),
    #{truncated := T1, undecodable := 0, buffered := 0} = tracekit_ring:stats(R),
    #{truncated := T2, undecodable := 0, buffered := 0} = tracekit_ring:stats(Small),
    #{events => Events, truncated => T1 + T2}.

model_of(R, Size) ->
    new_model(R, Size, drop, full, all).

%% Tags that are not atoms (or not trace tags): nothing is recorded (a
%% raw term once went into the record), each is counted as dropped.
junk_tags_run() ->
    Tags = [{send}, 1, -1, 1 bsl 70, 2.5, "send", <<"send">>, [send], self(),
            make_ref(), #{send => 1}, fun erlang:self/0, {}, [], foo, trace_status,
            remote_pid('fuzz@nohost', 1, 1), binary:copy(<<1>>, 100000)],
    {ok, R} = tracekit_ring:new(),
    Calls = [{F, T} || {_, F} <- callbacks(), T <- Tags],
    [{ok, ok} = call(tracekit_ring, F, [T, R, self(), x, #{timestamp => monotonic}])
     || {F, T} <- Calls],
    Enabled = [{E, T} || {E, _} <- callbacks(), T <- Tags, T =/= trace_status],
    [{ok, discard} = call(tracekit_ring, E, [T, R, self()]) || {E, T} <- Enabled],
    [] = tracekit_ring:drain(R),
    S = tracekit_ring:stats(R),
    Dropped = length(Calls) + length(Enabled),
    check(maps:with([written, dropped, filtered, undecodable], S) =:=
              #{written => 0, dropped => Dropped, filtered => 0, undecodable => 0},
          {junk_tag_stats, S}),
    %% tracekit_count ignores them too.
    {ok, C} = tracekit_count:new(),
    [{ok, ok} = call(tracekit_count, trace, [T, C, self(), x, #{}]) || T <- Tags],
    #{} = Counts = tracekit_count:read(C),
    check(Counts =:= #{}, {junk_tag_counts, Counts}),
    #{calls => Dropped + length(Tags)}.

%% Records larger than the drain's batch buffer (64 KiB) are drained, in
%% order, whole, by drain/1 and drain/2, from drop and overwrite rings.
large_records_run() ->
    Sizes = [1000, 65536 - 32, 65536, 70000, 131072, 200000, 262000],
    Me = self(),
    Sent = lists:append([[{trace, Me, send, binary:copy(<<(S rem 251)>>, S)},
                          {trace, Me, send, small}] || S <- Sizes]),
    N = lists:foldl(
          fun({RingSize, Policy, Drain}, Acc) ->
                  {ok, R} = tracekit_ring:new(#{size => RingSize, policy => Policy}),
                  [ok = tracekit_ring:trace(send, R, Me, Msg, #{}) || {trace, _, send, Msg} <- Sent],
                  Got = Drain(R),
                  S = tracekit_ring:stats(R),
                  check(Got =:= Sent andalso
                            maps:with([dropped, overwritten, undecodable, buffered, truncated], S)
                            =:= #{dropped => 0, overwritten => 0, undecodable => 0,
                                  buffered => 0, truncated => 0},
                        {large_records, RingSize, Policy, S, [brief(E) || E <- Got]}),
                  Acc + length(Got)
          end, 0, [{RS, P, D} || RS <- [1 bsl 20, 4 bsl 20], P <- [drop, overwrite],
                                 D <- [fun tracekit_ring:drain/1,
                                       fun(R) -> drain_by(R, 1, []) end,
                                       fun(R) -> drain_by(R, 3, []) end]]),
    #{events => N}.

drain_by(R, K, Acc) ->
    case tracekit_ring:drain(R, K) of
        [] -> Acc;
        Evs -> drain_by(R, K, Acc ++ Evs)
    end.

%% Terms nested around the depth rule (200) decode, as the rule keeps them,
%% in every field, by both drains.
deep_terms_run() ->
    Kinds = [fun(X) -> [X] end, fun(X) -> {X} end, fun(X) -> #{k => X} end,
             fun(X) -> [a, X | b] end, fun(X) -> {a, X} end,
             fun(X) -> #{X => v} end],
    Terms = [nest(D, Ks) || D <- [150, 198, 199, 200, 201, 250, 300],
                            Ks <- [[K] || K <- Kinds] ++ [Kinds]],
    {ok, R} = tracekit_ring:new(#{size => 4 bsl 20}),
    {ok, None} = tracekit_ring:new(#{size => 4 bsl 20, payload => none}),
    N = lists:foldl(
          fun({T, Drain}, Acc) ->
                  Opts = #{extra => T, match_spec_result => T, timestamp => monotonic},
                  [ok = tracekit_ring:trace(Tag, Ring, T, T, Opts)
                   || Ring <- [R, None], Tag <- [send, call, seq_trace]],
                  Got = Drain(R) ++ Drain(None),
                  Exp = [expect(Tag, T, T, Opts, (model_of(Ring, 4 bsl 20))#{mode := Mode})
                         || {Ring, Mode} <- [{R, full}, {None, none}],
                            Tag <- [send, call, seq_trace]],
                  check(length(Got) =:= length(Exp) andalso
                        lists:all(fun({E, G}) -> matches(E, G) end, lists:zip(Exp, Got)),
                        {deep_term, brief(T), [brief(G) || G <- Got]}),
                  %% Whole: none of them needed the marker for room.
                  [check(lists:all(fun({term, _, X}) -> X =/= undefined; (_) -> true end, Ps),
                         {deep_term_not_whole, brief(T)}) || {_, Ps} <- Exp],
                  Acc + length(Got)
          end, 0, [{T, D} || T <- Terms,
                             D <- [fun tracekit_ring:drain/1, fun(X) -> drain_by(X, 1, []) end]]),
    [#{undecodable := 0, truncated := 0} = tracekit_ring:stats(X) || X <- [R, None]],
    #{events => N}.

nest(Depth, Kinds) ->
    lists:foldl(fun(I, Inner) ->
                        K = lists:nth(I rem length(Kinds) + 1, Kinds),
                        K(Inner)
                end, leafy, lists:seq(1, Depth)).

%%% ==== trace files: the reader's decoder paths, private_dir =====================

reader_fuzz_run(N) ->
    Path = "reader_fuzz.tkt",
    {ok, F} = tracekit_file:new(#{path => Path}),
    ok = tracekit_file:close(F),
    {ok, H} = tracekit_file:reader_open(list_to_binary(Path)),
    ok = file:make_dir("pd"),
    ok = file:write_file("pd_file", <<>>),
    St0 = #{h => H, ndict => 0, lens => #{}, entries => 0, accepted => 0, chunks => 0,
            dirs => 0},
    St = lists:foldl(fun(_, S) ->
                             case weighted([{6, dict}, {3, events}, {1, dir}]) of
                                 dict -> reader_dict_op(S);
                                 events -> reader_events_op(S);
                                 dir -> private_dir_op(S)
                             end
                     end, St0, lists:seq(1, N)),
    St1 = expansion_op(St),
    ok = tracekit_file:reader_close(H),
    check(call(tracekit_file, reader_dict, [H, <<0:64>>]) =:= {ok, {error, closed}},
          reader_closed),
    maps:with([entries, accepted, chunks, dirs], St1).

%% Terms nested D deep: D tuples, one in the other.
nested(D) -> lists:foldl(fun(_, A) -> {A} end, x, lists:seq(1, D)).

%% An atom of N characters of C (bytes of UTF-8), as its external term.
atom_bytes(C, N) ->
    B = binary:copy(C, N),
    <<131, $v, (byte_size(B)):16, B/binary>>.

gen_entry() ->
    Whole = term_to_binary(pick([leaf(), any_term(), self(), hd(erlang:ports()), [],
                                 pick(ctx(remote)), ctx(dead_pid), nested(300),
                                 nested(5), ctx(long_atom)])),
    case rand:uniform(9) of
        1 -> atom_bytes(pick([<<"a">>, <<"é"/utf8>>, <<"😀"/utf8>>]), pick([1, 255, 256, 300]));
        2 -> term_to_binary(any_term(), [compressed]);
        3 -> <<131, (rand:bytes(rand:uniform(20)))/binary>>;
        4 -> binary:part(Whole, 0, rand:uniform(byte_size(Whole)));
        5 -> <<Whole/binary, 0>>;
        6 -> At = rand:uniform(byte_size(Whole)) - 1,
             <<Pre:At/binary, B, Post/binary>> = Whole,
             <<Pre/binary, (B bxor rand:uniform(255)), Post/binary>>;
        _ -> Whole
    end.

%% The rule (tk_ext.h) as the VM sees it: binary_to_term/1 takes the
%% whole, uncompressed, and it is an atom, a pid, a port or []. Tags 73
%% and 75 are the VM's own (an index into this VM's atom table, which
%% binary_to_term/1 takes): they mean nothing in a file of another VM, so
%% the rule refuses them.
entry_ok(<<131, 80, _/binary>>) ->
    false;
entry_ok(<<131, Internal, _/binary>>) when Internal =:= 73; Internal =:= 75 ->
    false;
entry_ok(E) ->
    try binary_to_term(E, [used]) of
        {T, Used} -> Used =:= byte_size(E) andalso
                         (is_atom(T) orelse is_pid(T) orelse is_port(T) orelse T =:= [])
    catch
        error:badarg -> false
    end.

dict_payload(First, Entries) ->
    <<First:32/little, (length(Entries)):32/little,
      (<< <<(byte_size(E)):32/little, E/binary>> || E <- Entries >>)/binary>>.

reader_dict_op(#{h := H, ndict := Nd, lens := Lens} = St) ->
    E = gen_entry(),
    Ok = entry_ok(E),
    First = case chance(0.05) of true -> Nd + rand:uniform(3) - 2; false -> Nd end,
    R = call(tracekit_file, reader_dict, [H, dict_payload(First, [E])]),
    Expect = case Ok andalso First =:= Nd of
                 true -> {ok, ok};
                 false -> {ok, {error, bad_chunk}}
             end,
    check(R =:= Expect, {reader_dict, brief(E), First, Nd, R, Expect}),
    St1 = St#{entries := maps:get(entries, St) + 1},
    case R of
        {ok, ok} -> St1#{ndict := Nd + 1, lens := Lens#{Nd => byte_size(E)},
                         accepted := maps:get(accepted, St) + 1};
        _ -> St1
    end.

%% A record in a file's form: {trace, Tracee, send, Msg}, the terms a
%% dictionary reference (maybe to an entry that is not there), an external
%% term (maybe nested too deep), or random bytes. Returns the record and
%% whether it must decode.
gen_file_record(Nd) ->
    Term = fun() ->
                   case rand:uniform(6) of
                       1 -> K = rand:uniform(Nd + 2) - 1,
                            {<<14, (uv(K))/binary>>, K < Nd};
                       2 -> D = pick([1, 150, 200, 201, 300]),
                            X = term_to_binary(nested(D)),
                            {<<10, (uv(byte_size(X)))/binary, X/binary>>, D =< 200};
                       %% (any_term/0 may nest deeper than 200; a term of a
                       %% budget of at most 20 nests at most that deep.)
                       3 -> X = term_to_binary(term(rand:uniform(20))),
                            {<<10, (uv(byte_size(X)))/binary, X/binary>>, true};
                       4 -> {<<12>>, true};
                       %% An integer of any size up to 64 bits, and a
                       %% varint past them.
                       5 -> I = rand:uniform(1 bsl 64) - (1 bsl 63),
                            {<<3, (uv(zigzag(I)))/binary>>, true};
                       6 -> {<<3, (binary:copy(<<16#ff>>, rand:uniform(4) + 9))/binary, 1>>,
                             false}
                   end
           end,
    {T1, Ok1} = Term(),
    {T2, Ok2} = Term(),
    case chance(0.1) of
        true -> {<<0, 0, (rand:bytes(rand:uniform(12)))/binary>>, unknown};
        false -> {<<0, 0, T1/binary, T2/binary>>, Ok1 andalso Ok2}
    end.

%% Varints (FORMAT.md).
uv(N) when N < 128 -> <<N>>;
uv(N) -> <<(N band 127 bor 128), (uv(N bsr 7))/binary>>.

zigzag(I) when I >= 0 -> 2 * I;
zigzag(I) -> -2 * I - 1.

events_payload(Recs) ->
    <<0:64, 0:64, (length(Recs)):32/little,
      (<< <<(byte_size(R)):32/little, 0:64, R/binary>> || R <- Recs >>)/binary>>.

reader_events_op(#{h := H, ndict := Nd} = St) ->
    Recs = [gen_file_record(Nd) || _ <- lists:seq(1, rand:uniform(5))],
    R = call(tracekit_file, reader_events, [H, events_payload([B || {B, _} <- Recs]), {0, 0, 1000}]),
    case R of
        {ok, {Events, Bad}} when is_list(Events), is_integer(Bad) ->
            check(length(Events) + Bad =:= length(Recs), {reader_events_count, R}),
            [check(is_tuple(E) andalso element(1, E) =:= trace, {reader_event, brief(E)})
             || {_, _, E} <- Events],
            %% Those that must decode did, those that must not did not.
            Must = length([x || {_, true} <- Recs]),
            MustNot = length([x || {_, false} <- Recs]),
            check(length(Events) >= Must andalso Bad >= MustNot,
                  {reader_events_rule, [{brief(B), K} || {B, K} <- Recs], R});
        {ok, {error, bad_chunk}} ->
            ok;
        Other ->
            fail({reader_events_answer, Other})
    end,
    St#{chunks := maps:get(chunks, St) + 1}.

%% References that stand for more than 16 MiB in one chunk are refused;
%% the same references over several chunks are read.
expansion_op(#{h := H, ndict := Nd, lens := Lens} = St) ->
    case [{K, L} || {K, L} <- maps:to_list(Lens), L >= 200] of
        [] ->
            St;
        [{K, L} | _] ->
            Per = 1000,
            Rec = << <<14, (uv(K))/binary>> || _ <- [1, 2] >>,
            Rec1 = <<0, 0, Rec/binary>>,
            Records = (16 bsl 20) div (2 * L) + 1,
            Chunk = events_payload(lists:duplicate(Records, Rec1)),
            check(call(tracekit_file, reader_events, [H, Chunk, {0, 0, 1000}]) =:=
                      {ok, {error, bad_chunk}}, {expansion_not_refused, K, L, Nd}),
            {ok, {Some, 0}} = call(tracekit_file, reader_events,
                                   [H, events_payload(lists:duplicate(Per, Rec1)), {0, 0, 1000}]),
            check(length(Some) =:= Per, expansion_read),
            St
    end.

private_dir_op(St) ->
    Parent = pick([<<"pd">>, <<"pd/">>, <<"pd_file">>, <<"nonexistent">>, <<"pd/x/y">>,
                   <<>>, <<"pd", 0, "x">>, x, "pd", 42]),
    Prefix = pick([<<>>, <<"tk-">>, <<"a/b">>, <<"x", 0>>, rand:bytes(rand:uniform(8)),
                   binary:copy(<<"p">>, 300), y, "tk"]),
    case call(tracekit_file, private_dir_nif, [Parent, Prefix]) of
        {ok, {ok, Dir}} ->
            Base = filename:basename(Dir),
            check(is_binary(Dir) andalso filename:dirname(Dir) =:= <<"pd">> andalso
                      binary:longest_common_prefix([Base, Prefix]) =:= byte_size(Prefix)
                      andalso byte_size(Base) =:= byte_size(Prefix) + 12,
                  {private_dir_path, Parent, Prefix, Dir}),
            {ok, I} = file:read_link_info(Dir),
            check(element(3, I) =:= directory andalso element(8, I) band 8#7777 =:= 8#700,
                  {private_dir_mode, Dir, I}),
            ok = file:del_dir(Dir),
            St#{dirs := maps:get(dirs, St) + 1};
        {ok, {error, Why}} when is_atom(Why) ->
            St;
        {badarg} ->
            check(not (is_binary(Parent) andalso is_binary(Prefix))
                  orelse Parent =:= <<>> orelse binary:match(Parent, <<0>>) =/= nomatch
                  orelse binary:match(Prefix, <<0>>) =/= nomatch
                  orelse byte_size(Prefix) >= 256,
                  {private_dir_badarg, Parent, Prefix}),
            St;
        Other ->
            fail({private_dir_answer, Parent, Prefix, Other})
    end.

%%% ==== tracekit_latency ======================================================

%% The model of a latency tracer made by the fuzzer: its settings, what
%% its callbacks were offered, and per process the calls open (as tk_lat
%% pairs them); per function {returns, exceptions, unfinished, nested}.
lat_model(Res, Size, Rec, Paused) ->
    #{res => Res, size => Size, recursion => Rec, paused => Paused, closed => false,
      filtered => 0, ignored => 0, calls => 0, returns => 0, exceptions => 0, exits => 0,
      unmatched => 0, lost => 0, stacks => #{}, fns => #{}}.

latency_fuzz_run(N) ->
    Alive = [spawn(fun() -> receive stop -> ok end end) || _ <- [1, 2, 3]],
    Pids = Alive ++ [ctx(dead_pid)],
    St0 = #{tracers => [], made => 0, calls => 0, pids => Pids, measured => 0},
    St1 = until_all_called(tracekit_latency, fun(S) -> lat_loop(100, S) end, lat_loop(N, St0)),
    St2 = lists:foldl(fun(T, S) -> lat_retire(T, S) end, St1#{tracers := []},
                      maps:get(tracers, St1)),
    [P ! stop || P <- Alive],
    #{calls => maps:get(calls, St2), tracers => maps:get(made, St2),
      measured => maps:get(measured, St2), not_called => not_called(tracekit_latency)}.

lat_loop(0, St) -> St;
lat_loop(N, St0) ->
    St = St0#{calls := maps:get(calls, St0) + 1},
    St1 = case maps:get(tracers, St) of
              [] -> lat_new(St);
              _ -> lat_op(weighted([{40, sequence}, {15, trace}, {15, enabled}, {1, new},
                                    {3, new_nif}, {3, read}, {3, stats}, {2, resume},
                                    {1, close}, {1, retire}, {4, misc}]), St)
          end,
    lat_loop(N - 1, St1).

%% A new tracer: 1 MiB rings (never full here: the model is exact), now
%% and then paused.
lat_new(St) ->
    Rec = pick([outermost, each]),
    Paused = chance(0.2),
    case call(tracekit_latency, new_nif, [1 bsl 20, Rec, 10000, 100000, 1000000, Paused]) of
        {ok, {ok, L}} ->
            Ts = maps:get(tracers, St),
            St1 = case length(Ts) >= 4 of
                      true -> lat_retire(lists:last(Ts), St#{tracers := lists:droplast(Ts)});
                      false -> St
                  end,
            St1#{tracers := [lat_model(L, 1 bsl 20, Rec, Paused) | maps:get(tracers, St1)],
                 made := maps:get(made, St1) + 1};
        Other ->
            fail({latency_new, Other})
    end.

lat_state(St) ->
    Ts = maps:get(tracers, St),
    case weighted([{75, tracer}, {5, copy}, {20, junk}]) of
        tracer when Ts =/= [] -> maps:get(res, pick(Ts));
        copy when Ts =/= [] -> binary_to_term(term_to_binary(maps:get(res, pick(Ts))));
        _ -> pick([undefined, self(), make_ref(), ctx(atomics), ctx(counter), 0, <<>>, leaf()])
    end.

lat_of(S, St) ->
    case [T || T <- maps:get(tracers, St), maps:get(res, T) =:= S] of
        [T] -> T;
        [] -> none
    end.

lat_put(T, St) ->
    R = maps:get(res, T),
    St#{tracers := [case maps:get(res, X) =:= R of true -> T; false -> X end
                    || X <- maps:get(tracers, St)]}.

lat_kind(call) -> call;
lat_kind(return_from) -> return;
lat_kind(exception_from) -> exception;
lat_kind(exit) -> exit;
lat_kind(_) -> none.

lat_mfa() ->
    pick([{lat_m, f, 0}, {lat_m, g, 1}, {lat_m, h, 2}, {lat_n, f, 0}]).

%% A call, return, exception or exit of one of the fuzzer's processes,
%% shaped as the VM makes it.
lat_op(sequence, St) ->
    P = pick(maps:get(pids, St)),
    S = lat_state(St),
    %% Mostly the end of the call the process is in (as the model has it).
    {M, F, A} = MFA = case lat_of(S, St) of
                          #{stacks := #{P := [{Top, _, _} | _]}} -> case chance(0.7) of
                                                                        true -> Top;
                                                                        false -> lat_mfa()
                                                                    end;
                          _ -> lat_mfa()
                      end,
    {Tag, Term} = case rand:uniform(100) of
                      N when N =< 47 -> {call, {M, F, case chance(0.8) of
                                                          true -> lists:duplicate(A, x);
                                                          false -> A
                                                      end}};
                      N when N =< 87 -> {return_from, MFA};
                      N when N =< 97 -> {exception_from, MFA};
                      _ -> {exit, pick([normal, killed, any_term()])}
                  end,
    lat_trace(Tag, S, P, Term, St);
lat_op(trace, St) ->
    Tag = case chance(0.5) of true -> pick([call, return_from, exception_from, exit]);
                              false -> gen_tag() end,
    lat_trace(Tag, lat_state(St), gen_tracee(), gen_msg(Tag), St);
lat_op(enabled, St) ->
    {EnabledF, _} = pick(callbacks()),
    Tag = pick([trace_status, call, return_from, exit, gen_tag()]),
    S = lat_state(St),
    R = call(tracekit_latency, EnabledF, [Tag, S, gen_tracee()]),
    T = lat_of(S, St),
    Live = T =/= none andalso not maps:get(closed, T),
    Want = case Tag of
               trace_status when Live -> trace;
               trace_status -> remove;
               _ when not Live -> discard;
               _ -> case lat_kind(Tag) =/= none andalso not maps:get(paused, T) of
                        true -> trace;
                        false -> discard
                    end
           end,
    check(R =:= {ok, Want}, {latency_enabled, Tag, R, Want}),
    case Live andalso Tag =/= trace_status andalso Want =:= discard of
        true -> lat_put(T#{filtered := maps:get(filtered, T) + 1}, St);
        false -> St
    end;
lat_op(new, St) ->
    lat_new(St);
lat_op(new_nif, St) ->
    %% Arguments valid and not: badarg, or a tracer (closed at once).
    Args = [pick([4096, 1 bsl 20, 4095, 0, -1, 1 bsl 40, x, 4096.0]),
            pick([outermost, each, deepest, 1]),
            pick([1, 10000, 1000000, 1000001, 0, x]),
            pick([1, 100000, 10000000, 10000001, 0]),
            pick([1, 1000000, 100000000, 100000001, 0, -5]),
            pick([true, false, yes])],
    Valid = lists:member(hd(Args), [4096, 1 bsl 20])
        andalso lists:member(lists:nth(2, Args), [outermost, each])
        andalso lists:member(lists:nth(3, Args), [1, 10000, 1000000])
        andalso lists:member(lists:nth(4, Args), [1, 100000, 10000000])
        andalso lists:member(lists:nth(5, Args), [1, 1000000, 100000000])
        andalso is_boolean(lists:nth(6, Args)),
    case {call(tracekit_latency, new_nif, Args), Valid} of
        {{ok, {ok, L}}, true} -> {ok, ok} = call(tracekit_latency, close, [L]), St;
        {{badarg}, false} -> St;
        Other -> fail({latency_new_nif, brief(Args), Other})
    end;
lat_op(read, St) ->
    S = lat_state(St),
    case {call(tracekit_latency, read, [S]), lat_of(S, St)} of
        {{ok, #{functions := F, counters := C}}, #{}} when is_map(F), is_map(C) -> St;
        {{badarg}, none} -> St;
        Other -> fail({latency_read, brief(Other)})
    end;
lat_op(stats, St) ->
    S = lat_state(St),
    case {call(tracekit_latency, stats, [S]), lat_of(S, St)} of
        {{ok, #{calls := _}}, #{}} -> St;
        {{badarg}, none} -> St;
        Other -> fail({latency_stats, brief(Other)})
    end;
lat_op(resume, St) ->
    S = lat_state(St),
    case {call(tracekit_latency, resume, [S]), lat_of(S, St)} of
        {{ok, ok}, #{} = T} -> lat_put(T#{paused := false}, St);
        {{badarg}, none} -> St;
        Other -> fail({latency_resume, Other})
    end;
lat_op(close, St) ->
    S = lat_state(St),
    case {call(tracekit_latency, close, [S]), lat_of(S, St)} of
        {{ok, ok}, #{} = T} -> lat_put(lat_check(lat_closed(T)), St);
        {{badarg}, none} -> St;
        Other -> fail({latency_close, Other})
    end;
lat_op(retire, St) ->
    [T | Rest] = maps:get(tracers, St),
    lat_retire(T, St#{tracers := Rest});
lat_op(misc, St) ->
    case rand:uniform(4) of
        1 ->
            I = pick([0, 127, 128, 3775, 3776, -1, 1 bsl 64, x, rand:uniform(4000) - 1]),
            case {call(tracekit_latency, bucket, [I]), is_integer(I) andalso I >= 0 andalso I < 3776} of
                {{ok, {Lo, Hi, V}}, true} -> check(Lo =< V andalso V =< Hi, {bucket, I, Lo, Hi, V});
                {{badarg}, false} -> ok;
                Other -> fail({latency_bucket, I, Other})
            end;
        2 ->
            L = case chance(0.5) of
                    true -> [rand:uniform(1 bsl rand:uniform(63)) || _ <- lists:seq(1, rand:uniform(50))];
                    false -> pick([[], [1, -1], [x], [1 | 2], x, [1 bsl 64], [0, 1 bsl 64 - 1], [1.0]])
                end,
            Valid = is_list(L) andalso lists:all(fun(V) -> is_integer(V) andalso V >= 0 andalso V < 1 bsl 64 end,
                                                 try lists:reverse(L) catch _:_ -> [x] end),
            case {call(tracekit_latency, histogram_nif, [L]), Valid} of
                {{ok, #{count := C, sum := Sum}}, true} ->
                    check(C =:= length(L) andalso Sum =:= lists:sum(L), {histogram, brief(L)});
                {{badarg}, false} -> ok;
                Other -> fail({latency_histogram, brief(L), Other})
            end;
        3 ->
            {ok, #{min_size := 4096}} = call(tracekit_latency, limits, []),
            {ok, #{buckets := 3776}} = call(tracekit_latency, layout, []),
            ok;
        4 ->
            [case call(tracekit_latency, F, [any_term()]) of
                 {badarg} -> ok;
                 Other -> fail({latency_junk, F, Other})
             end || F <- [read, stats, resume, close]]
    end,
    St.

%% A trace callback (any of them: all serve every tag) and the model's
%% part of it.
lat_trace(Tag, S, Tracee, Term, St) ->
    {_, TraceF} = pick(callbacks()),
    R = call(tracekit_latency, TraceF, [Tag, S, Tracee, Term, gen_opts(Tag)]),
    check(R =:= {ok, ok}, {latency_trace, TraceF, R}),
    case lat_of(S, St) of
        #{closed := false} = T -> lat_put(lat_event(lat_kind(Tag), Tracee, Term, T), St);
        _ -> St
    end.

local_pid(P) -> is_pid(P) andalso node(P) =:= node().

%% The function of an event's term, or none when no record can hold it.
lat_term_mfa(call, {M, F, Args}) when is_atom(M), is_atom(F) ->
    Arity = if is_integer(Args) -> Args;
               is_list(Args) -> try length(Args) catch error:badarg -> -1 end;
               true -> -1
            end,
    case Arity >= 0 andalso Arity =< 255 of
        true -> {M, F, Arity};
        false -> none
    end;
lat_term_mfa(K, {M, F, A}) when K =/= call, is_atom(M), is_atom(F), is_integer(A),
                                A >= 0, A =< 255 ->
    {M, F, A};
lat_term_mfa(_, _) ->
    none.

lat_event(_, _, _, #{paused := true} = T) ->
    T#{filtered := maps:get(filtered, T) + 1};
lat_event(none, _, _, T) ->
    T#{filtered := maps:get(filtered, T) + 1};
lat_event(exit, P, _, T) ->
    case local_pid(P) of
        true -> lat_exit(P, T#{exits := maps:get(exits, T) + 1});
        false -> T#{ignored := maps:get(ignored, T) + 1}
    end;
lat_event(K, P, Term, T) ->
    case {local_pid(P), lat_term_mfa(K, Term)} of
        {true, MFA} when MFA =/= none ->
            case K of
                call -> lat_call(P, MFA, T#{calls := maps:get(calls, T) + 1});
                return -> lat_end(P, MFA, returns, T#{returns := maps:get(returns, T) + 1});
                exception -> lat_end(P, MFA, exceptions,
                                     T#{exceptions := maps:get(exceptions, T) + 1})
            end;
        _ ->
            T#{ignored := maps:get(ignored, T) + 1}
    end.

fn_add(MFA, K, T) ->
    Fns = maps:get(fns, T),
    F = maps:get(MFA, Fns, #{returns => 0, exceptions => 0, unfinished => 0, nested => 0}),
    T#{fns := Fns#{MFA => F#{K := maps:get(K, F) + 1}}}.

%% As tk_lat pairs: a frame {MFA, Measured, Repeats} per call open. A
%% function is known from its first call on.
lat_call(P, MFA, #{stacks := Stacks, recursion := Rec, fns := Fns} = T0) ->
    T = T0#{fns := maps:merge(#{MFA => #{returns => 0, exceptions => 0, unfinished => 0,
                                          nested => 0}}, Fns)},
    S = maps:get(P, Stacks, []),
    case {Rec, S} of
        {outermost, [{MFA, M, R} | Rest]} ->
            fn_add(MFA, nested, T#{stacks := Stacks#{P => [{MFA, M, R + 1} | Rest]}});
        {outermost, _} ->
            case lists:keymember(MFA, 1, S) of
                true -> fn_add(MFA, nested, T#{stacks := Stacks#{P => [{MFA, false, 0} | S]}});
                false -> T#{stacks := Stacks#{P => [{MFA, true, 0} | S]}}
            end;
        {each, _} ->
            T#{stacks := Stacks#{P => [{MFA, true, 0} | S]}}
    end.

lat_end(P, MFA, K, #{stacks := Stacks} = T) ->
    case maps:get(P, Stacks, []) of
        [] ->
            T#{unmatched := maps:get(unmatched, T) + 1};
        [{MFA, M, R} | Rest] when R > 0 ->
            T#{stacks := Stacks#{P => [{MFA, M, R - 1} | Rest]}};
        [{MFA, true, 0} | Rest] ->
            fn_add(MFA, K, T#{stacks := Stacks#{P => Rest}});
        [{MFA, false, 0} | Rest] ->
            T#{stacks := Stacks#{P => Rest}};
        S ->
            T#{unmatched := maps:get(unmatched, T) + 1,
               lost := maps:get(lost, T) + length([x || {_, true, _} <- S]),
               stacks := maps:remove(P, Stacks)}
    end.

lat_exit(P, #{stacks := Stacks} = T) ->
    T1 = lists:foldl(fun({MFA, true, _}, A) -> fn_add(MFA, unfinished, A);
                        (_, A) -> A
                     end, T, maps:get(P, Stacks, [])),
    T1#{stacks := maps:remove(P, Stacks)}.

lat_closed(#{stacks := Stacks} = T) ->
    T1 = lists:foldl(fun(P, A) -> lat_exit(P, A) end, T, maps:keys(Stacks)),
    T1#{closed := true}.

%% The tracer's counters and histograms, as the model says.
lat_check(#{res := L, fns := Fns} = T) ->
    #{functions := Got, counters := C} = tracekit_latency:read(L),
    Want = maps:with([calls, returns, exceptions, exits, unmatched, lost, filtered, ignored], T),
    check(maps:with(maps:keys(Want), C) =:= Want andalso maps:get(dropped, C) =:= 0
          andalso maps:get(taken, C) =:= maps:get(written, C)
          andalso maps:get(written, C) =:= maps:get(calls, T) + maps:get(returns, T)
              + maps:get(exceptions, T) + maps:get(exits, T),
          {latency_counters, Want, C}),
    GotFns = maps:map(fun(_, #{returns := #{count := R}, exceptions := #{count := E},
                               unfinished := U, nested := N}) ->
                              #{returns => R, exceptions => E, unfinished => U, nested => N}
                      end, Got),
    check(GotFns =:= Fns, {latency_functions, Fns, GotFns}),
    T.

%% A tracer the fuzzer is done with: closed and checked, then forgotten.
lat_retire(T0, St) ->
    T = case maps:get(closed, T0) of
            true -> T0;
            false ->
                {ok, ok} = call(tracekit_latency, close, [maps:get(res, T0)]),
                lat_closed(T0)
        end,
    lat_check(T),
    #{counters := #{measured := M}} = tracekit_latency:read(maps:get(res, T)),
    St#{measured := maps:get(measured, St) + M}.

%% Processes calling the callbacks of shared tracers (big and small rings)
%% at once, while others read them and one closes them: every call and
%% return of a big ring is paired; a small ring drops, and what it takes
%% and drops adds up to what was offered; nothing crashes.
concurrent_latency_run(N) ->
    {ok, Big} = tracekit_latency:new(#{recursion => each}),
    {ok, Small} = tracekit_latency:new(#{size => 4096}),
    Self = self(),
    PerWriter = max(500, N div 4),
    Writers = [spawn_link(fun() ->
                                  _ = rand:seed(exsss, I),
                                  [begin
                                       MFA = lat_mfa(),
                                       {M, F, A} = MFA,
                                       [ok = tracekit_latency:trace_call(call, L, self(), {M, F, lists:duplicate(A, y)}, #{})
                                        || L <- [Big, Small]],
                                       [ok = tracekit_latency:trace_call(return_from, L, self(), MFA, #{})
                                        || L <- [Big, Small]],
                                       case K rem 50 of 0 -> erlang:yield(); _ -> ok end
                                   end || K <- lists:seq(1, PerWriter)],
                                  Self ! {written, self()}
                          end) || I <- lists:seq(1, 4)],
    Reader = spawn_link(fun() -> lat_reader([Big, Small]) end),
    [receive {written, W} -> ok end || W <- Writers],
    Reader ! {stop, self()},
    receive {stopped, Reader} -> ok end,
    ok = tracekit_latency:close(Big),
    ok = tracekit_latency:close(Small),
    #{counters := CB} = tracekit_latency:read(Big),
    #{counters := CS} = tracekit_latency:read(Small),
    Offered = 4 * PerWriter,
    check(maps:with([calls, returns, measured, dropped], CB)
          =:= #{calls => Offered, returns => Offered, measured => Offered, dropped => 0},
          {concurrent_big, CB}),
    check(maps:get(calls, CS) + maps:get(returns, CS) + maps:get(dropped, CS) =:= 2 * Offered
          andalso maps:get(measured, CS) =< Offered
          andalso maps:get(taken, CS) =:= maps:get(written, CS),
          {concurrent_small, CS}),
    #{measured => maps:get(measured, CB), small_dropped => maps:get(dropped, CS)}.

lat_reader(Ls) ->
    receive
        {stop, From} -> From ! {stopped, self()}
    after 0 ->
            [#{counters := _} = tracekit_latency:read(L) || L <- Ls],
            [#{calls := _} = tracekit_latency:stats(L) || L <- Ls],
            timer:sleep(1),
            lat_reader(Ls)
    end.
