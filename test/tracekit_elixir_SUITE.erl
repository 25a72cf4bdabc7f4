%% Elixir syntax on the Erlang side: this node loads Elixir by code path
%% (the Elixir of scripts/elixir, which the Makefile gives as
%% TRACEKIT_ELIXIR, else the `elixir' on PATH), and a peer without it
%% shows what happens where Elixir is absent. Skipped when there is no
%% Elixir for this OTP.
-module(tracekit_elixir_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_suite/1, end_per_suite/1, init_per_testcase/2, end_per_testcase/2]).
-export([specs_compile_to_hand_written_match_specs/1, erlang_specs_are_unchanged/1,
         elixir_errors/1, elixir_lines/1, erlang_lines_are_unchanged/1,
         a_trace_prints_elixir_lines/1, giant_terms_are_bounded/1,
         without_elixir/1, specs_make_no_atoms/1, atoms_of_a_module_not_loaded_yet/1,
         lent_node_prints_elixir/1]).
-export([handle_call/3]).
-export([atoms_made_by_specs/1]).

all() ->
    [specs_compile_to_hand_written_match_specs, erlang_specs_are_unchanged, elixir_errors,
     elixir_lines, erlang_lines_are_unchanged, a_trace_prints_elixir_lines,
     giant_terms_are_bounded, without_elixir, specs_make_no_atoms,
     atoms_of_a_module_not_loaded_yet, lent_node_prints_elixir].

handle_call(Req, _From, State) -> {reply, Req, State}.

init_per_suite(Config) ->
    Bin = case os:getenv("TRACEKIT_ELIXIR", "") of
              "" -> case os:find_executable("elixir") of
                        false -> none;
                        Exe -> filename:dirname(Exe)
                    end;
              Dir -> Dir
          end,
    Ebins = case Bin of
                none -> [];
                _ -> filelib:wildcard(filename:join([Bin, "..", "lib", "*", "ebin"]))
            end,
    case [E || E <- Ebins, filename:basename(filename:dirname(E)) =:= "elixir"] of
        [] ->
            {skip, "no Elixir for this OTP (TRACEKIT_ELIXIR unset and no elixir on PATH)"};
        [_ | _] ->
            ok = code:add_pathsa(Ebins),
            {module, _} = code:ensure_loaded('Elixir.Code'),
            [{elixir_ebins, Ebins} | Config]
    end.

end_per_suite(Config) ->
    _ = [code:del_path(E) || E <- proplists:get_value(elixir_ebins, Config, [])],
    ok.

init_per_testcase(_Case, Config) ->
    [{io, tk_capture:start()} | Config].

end_per_testcase(_Case, Config) ->
    ok = tracekit:stop(),
    tk_capture:stop(?config(io, Config)).

one(Spec) ->
    {ok, [C]} = tracekit_spec:parse(Spec),
    C.

ms(Spec) ->
    #{module := M, function := F, arity := A, match_spec := MS} = one(Spec),
    {M, F, A, MS}.

why(Spec) ->
    {error, {bad_spec, _, Why}} = tracekit_spec:resolve(Spec),
    unicode:characters_to_list(Why).

specs_compile_to_hand_written_match_specs(_Config) ->
    ?assertEqual({'Elixir.Enum', map, 2, [{'_', [], []}]}, ms("Enum.map/2")),
    ?assertEqual({'Elixir.Enum', map, 2, [{'_', [], []}]}, ms(<<"Enum.map/2">>)),
    ?assertEqual({lists, seq, 2, [{'_', [], []}]}, ms(":lists.seq/2")),
    ?assertEqual({'Elixir.MyApp.Server', handle_call, 3,
                  [{[#{op => get}, '_', '_'], [], [{return_trace}]}]},
                 ms("MyApp.Server.handle_call(%{op: :get}, _, _) -> return")),
    ?assertEqual({'Elixir.String', split, 2, [{['$1', <<",">>], [{is_binary, '$1'}], []}]},
                 ms("String.split(s, \",\") when is_binary(s)")),
    ?assertEqual({'Elixir.MyApp.Server', handle_call, 3,
                  [{'_', [], [{message, {{stack, {current_stacktrace, 9}}}}]}]},
                 ms("MyApp.Server.handle_call/3 -> stack")),
    ?assertEqual({'Elixir.Enum', map, 2, [{'_', [], []}]}, ms(fun 'Elixir.Enum':map/2)),
    ?assertEqual({m, f, 2, [{[#{'__struct__' => '_', k => '$1'}, '$1'], [], []}]},
                 ms(":m.f(%_{k: v}, v)")),
    %% The same match spec as the Erlang spec of the same meaning.
    ?assertEqual(ms("m:f({get, K}, _) when is_atom(K) andalso K =/= x -> return"),
                 ms(":m.f({:get, k}, _) when is_atom(k) and k !== :x -> return")),
    %% The match specs select on the VM what they say.
    MS = maps:get(match_spec, one("MyApp.Server.handle_call(%{op: :get}, _, s) when s.n > 1")),
    ?assertMatch({ok, true, _, _},
                 erlang:match_spec_test([#{op => get}, x, #{n => 2}], MS, trace)),
    ?assertMatch({ok, false, _, _},
                 erlang:match_spec_test([#{op => get}, x, #{n => 1}], MS, trace)),
    ?assertMatch({ok, false, _, _},
                 erlang:match_spec_test([#{op => put}, x, #{n => 2}], MS, trace)).

erlang_specs_are_unchanged(_Config) ->
    C = one("lists:seq(A, B) when B > A -> return"),
    ?assertNot(is_map_key(syntax, C)),
    ?assertEqual([{['$1', '$2'], [{'>', '$2', '$1'}], [{return_trace}]}], maps:get(match_spec, C)),
    ?assertEqual("lists:seq(A, B) when B > A -> return", maps:get(text, C)).

elixir_errors(_Config) ->
    ?assertMatch("undefined function Enum.map/3 (the module has map/2)" ++ _, why("Enum.map/3")),
    ?assertMatch("undefined function :tracekit_elixir_SUITE.handle_call/2 (the module has "
                 "handle_call/3); for example \":tracekit_elixir_SUITE.handle_call/3\"",
                 why(":tracekit_elixir_SUITE.handle_call/2")),
    ?assertMatch("module Nope.Nothing is not available" ++ _, why("Nope.Nothing.f/1")),
    ?assertMatch("module Nope.Nothing is not available" ++ _,
                 why(erlang:make_fun('Elixir.Nope.Nothing', f, 1))),
    ?assertMatch("argument pattern ^x is not supported: ^x pins a variable" ++ _,
                 why("Enum.map(%{k: [^x]}, _)")),
    ?assertMatch("an anonymous function cannot be traced" ++ _, why(fun(X) -> X end)),
    %% A capture of a function that does not exist (&Enum.mapp/2).
    ?assertMatch("undefined function Enum.mapp (module Enum has no function mapp); "
                 "for example \"Enum.map/2\"" ++ _,
                 why(erlang:make_fun('Elixir.Enum', mapp, 2))),
    ?assertMatch("Elixir.Enum is not an atom in Erlang: quote a module whose name begins "
                 "with a capital, 'Elixir.Enum':map/2, or write the spec in Elixir syntax, "
                 "Enum.map/2" ++ _, why("Elixir.Enum:map/2")),
    %% Every Elixir error ends in an Elixir example.
    ?assertNotEqual(nomatch, string:find(why("Enum.map(x"), "for example \"Enum.map/2\"")),
    %% Hostile input: errors, never a crash.
    ?assertMatch("the spec is longer than 65536 characters" ++ _,
                 why("M.f(" ++ lists:duplicate(70000, $x) ++ ")")),
    Deep = lists:duplicate(20000, ${) ++ lists:duplicate(20000, $}),
    ?assertMatch({ok, _}, tracekit_spec:parse(":lists.reverse(" ++ Deep ++ ")")),
    ?assertMatch({error, {bad_spec, _, _}}, tracekit_spec:parse("M.f(" ++ [16#D800] ++ ")")),
    ?assertMatch({error, {bad_spec, _, _}}, tracekit_spec:parse("&&&&")),
    ?assertMatch({error, {bad_spec, _, _}}, tracekit_spec:parse(":\"\".f(x) when x ++ [1]")).

elixir_lines(_Config) ->
    P = list_to_pid("<0.105.0>"),
    R = list_to_ref("#Ref<0.1.2.98937>"),
    Events = [{trace, P, call, {'Elixir.MyApp.Server', handle_call,
                                [#{op => get}, {P, [alias | R]}, <<"text">>]}},
              {trace, P, return_from, {'Elixir.MyApp.Server', handle_call, 3}, {reply, ok, "ab"}},
              {trace, P, exception_from, {lists, seq, 2}, {error, badarg}},
              {trace, P, send, {R, ok}, R},
              {trace, P, spawn, P, {'Elixir.Task', start, [1]}}],
    Lines = [unicode:characters_to_list(L)
             || {_, L} <- tracekit_format:events(Events, #{syntax => elixir, short_refs => true,
                                                          names => #{P => 'Elixir.MyApp.Server'}})],
    ?assertEqual(["#PID<0.105.0> (MyApp.Server) MyApp.Server.handle_call(%{op: :get}, "
                  "{#PID<0.105.0>, [:alias | #Reference<..98937>]}, \"text\")",
                  "#PID<0.105.0> (MyApp.Server) MyApp.Server.handle_call/3 -> {:reply, :ok, ~c\"ab\"}",
                  "#PID<0.105.0> (MyApp.Server) :lists.seq/2 raised error: :badarg",
                  "#PID<0.105.0> (MyApp.Server) ! {#Reference<..98937>, :ok} -> alias #Reference<..98937>",
                  "#PID<0.105.0> (MyApp.Server) spawned #PID<0.105.0> (MyApp.Server) as Task.start(1)"],
                 Lines).

erlang_lines_are_unchanged(_Config) ->
    P = list_to_pid("<0.105.0>"),
    E = {trace, P, call, {m, f, [#{op => get}, "ab", <<"t">>]}},
    ?assertEqual("<0.105.0> m:f(#{op => get}, \"ab\", <<\"t\">>)",
                 unicode:characters_to_list(tracekit_format:event(E, #{}))),
    ?assertEqual(tracekit_format:event(E, #{}), tracekit_format:event(E, #{syntax => erlang})).

a_trace_prints_elixir_lines(Config) ->
    Io = ?config(io, Config),
    {ok, T} = tracekit:calls(":tracekit_elixir_SUITE.handle_call({:get, _}, _, _) -> return",
                             #{io => Io, max_events => 2, syntax => elixir, colour => false}),
    {reply, {get, k}, #{n := 1}} = ?MODULE:handle_call({get, k}, self(), #{n => 1}),
    {ok, _} = tracekit:wait(T, 10000),
    Lines = tk_capture:lines(Io),
    ct:log("~p", [Lines]),
    [Header, Call, Return, _Summary] = Lines,
    ?assertEqual("tracekit: tracing calls to :tracekit_elixir_SUITE.handle_call({:get, _}, _, _) "
                 "-> return in all processes (stops after 2 events or 15000 ms)", Header),
    ?assertMatch({match, _}, re:run(Call, "^[0-9:.]+ #PID<[0-9.]+> :tracekit_elixir_SUITE\\."
                                          "handle_call\\(\\{:get, :k\\}, #PID<[0-9.]+>, %\\{n: 1\\}\\)$")),
    ?assertMatch({match, _}, re:run(Return, "^[0-9:.]+ #PID<[0-9.]+> :tracekit_elixir_SUITE\\."
                                            "handle_call/3 -> \\{:reply, \\{:get, :k\\}, %\\{n: 1\\}\\}$")),
    %% Not in iex: auto is Erlang.
    tk_capture:clear(Io),
    {ok, T3} = tracekit:calls("Enum.map/2", #{io => Io, max_events => 1, colour => false}),
    _ = 'Elixir.Enum':map([1], fun(X) -> X end),
    {ok, _} = tracekit:wait(T3, 10000),
    ?assertMatch([_, "<" ++ _ | _], [string:slice(L, 16) || L <- tk_capture:lines(Io)]).

giant_terms_are_bounded(_Config) ->
    Big = #{'__struct__' => 'Elixir.URI', m => maps:from_list([{I, I} || I <- lists:seq(1, 1000000)]),
            l => lists:seq(1, 1000000), b => binary:copy(<<"a">>, 10000000),
            t => list_to_tuple(lists:seq(1, 1000000))},
    Deep = lists:foldl(fun(_, A) -> [A] end, [], lists:seq(1, 100000)),
    %% The VM's CPU time, not the wall clock: a loaded machine stretches
    %% the one, not the other.
    {Cpu0, _} = statistics(runtime),
    {Us, Line} = timer:tc(fun() -> tracekit_format:event({trace, self(), call, {m, f, [Big, Deep]}},
                                                         #{syntax => elixir}) end),
    {Cpu1, _} = statistics(runtime),
    ct:log("~w us wall, ~w ms of CPU: ~ts", [Us, Cpu1 - Cpu0, Line]),
    ?assert(string:length(Line) =< 240),
    ?assert(Cpu1 - Cpu0 < 1000),
    %% A bitstring is cut as a binary is (whole, inspect looked at its 10
    %% MB for 1.5 s), and a cut string ends at a character: it prints as
    %% a string, not as bytes.
    P = list_to_pid("<0.105.0>"),
    Ex = fun(T) -> unicode:characters_to_list(
                     tracekit_format:event({trace, P, call, {m, f, [T]}}, #{syntax => elixir}))
         end,
    ?assertMatch("#PID<0.105.0> :m.f(\"aaaaaaaa" ++ _,
                 Ex(<<(binary:copy(<<"a">>, 10000000))/binary, 1:3>>)),
    ?assertMatch("#PID<0.105.0> :m.f(\"€€€€€€€€" ++ _, Ex(binary:copy(<<"€"/utf8>>, 1000000))).

without_elixir(_Config) ->
    Paths = [filename:dirname(code:which(M)) || M <- [tracekit, ?MODULE]],
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                      args => lists:append([["-pa", D] || D <- Paths])}),
    Call = fun(M, F, A) -> peer:call(Peer, M, F, A) end,
    try
        {error, {bad_spec, "Enum.map/2", Why}} = Call(tracekit_spec, parse, ["Enum.map/2"]),
        ?assertMatch("the spec is in Elixir syntax, and Elixir is not loaded in this node: write "
                     "it in Erlang syntax ('Elixir.Enum':map/2)" ++ _, unicode:characters_to_list(Why)),
        ?assertMatch({error, {bad_option, {syntax, elixir}, _}},
                     Call(tracekit, calls, ["lists:seq/2", #{syntax => elixir}])),
        ?assertError(badarg, Call(tracekit_format, event, [x, #{syntax => elixir}])),
        {ok, [#{text := "fun lists:seq/2"}]} = Call(tracekit_spec, parse, [fun lists:seq/2]),
        ?assertEqual(false, Call(code, is_loaded, ['Elixir.Code']))
    after
        peer:stop(Peer)
    end.

%% Text given as a spec never makes atoms (they are never collected: a
%% stream of specs, from a web page say, would fill the table and stop
%% the node). Each form below names a new name 3,000 times; without the
%% parser's encoder each made at least one atom. The specs are read in a
%% peer started plainly: the node of `rebar3 ct' has rebar3's escript in
%% its code path, which OTP 27 reads through, archive by archive, at each
%% look-up of a module that is not there (26 ms each: 185 s for the
%% 9,000 specs that name one; 0.5 ms on OTP 29).
specs_make_no_atoms(Config) ->
    Paths = [filename:dirname(code:which(M)) || M <- [tracekit, ?MODULE]],
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                      args => lists:append([["-pa", D] || D <- Paths])}),
    {Made, Specs} =
        try
            peer:call(Peer, ?MODULE, atoms_made_by_specs, [?config(elixir_ebins, Config)],
                      600000)
        after
            peer:stop(Peer)
        end,
    ct:log("~w atoms made by ~w specs", [Made, Specs]),
    ?assert(Made < 20),
    %% What they say, in Elixir's terms.
    ?assertMatch("module Nope1.Mod is not available" ++ _, why("Nope1.Mod.f/1")),
    ?assertMatch("undefined function Enum.nope1 (module Enum has no function nope1)" ++ _,
                 why("Enum.nope1/2")),
    ?assertMatch("the atom :nope1 does not exist in this node, so no call can hold it" ++ _,
                 why("Enum.map(x, :nope1)")),
    ?assertMatch("nope1(x) cannot be used in a guard" ++ _, why("Enum.map(x, y) when nope1(x)")),
    ?assertMatch({ok, [#{match_spec := [{['$1', '$1'], [{is_list, '$1'}], []}]}]},
                 tracekit_spec:parse("Enum.map(v1, v1) when is_list(v1)")).

%% In the peer: the atoms that 3,000 specs of each form make, Elixir
%% loaded as in this suite's node.
atoms_made_by_specs(Ebins) ->
    ok = code:add_pathsa(Ebins),
    {module, _} = code:ensure_loaded('Elixir.Code'),
    Forms = [fun(N) -> ["Nope", N, ".Mod.f/1"] end,
             fun(N) -> [":nope", N, ".f/1"] end,
             fun(N) -> ["Enum.nope", N, "/2"] end,
             fun(N) -> ["Enum.map(x, :nope", N, ")"] end,
             fun(N) -> ["Enum.map(%{nope", N, ": 1}, y)"] end,
             fun(N) -> ["Enum.map([nope", N, ": 1], y)"] end,
             fun(N) -> ["Enum.map(%Nope", N, "{}, y)"] end,
             fun(N) -> ["Enum.map(v", N, ", v", N, ") when is_list(v", N, ")"] end,
             fun(N) -> ["Enum.map(x, y) when x.nope", N, " > 1"] end,
             fun(N) -> ["Enum.map(x, y) when nope", N, "(x)"] end,
             fun(N) -> ["Enum.map(x, y) when :erlang.nope", N, "(x)"] end,
             fun(N) -> ["Enum.map(~NOPE", N, "\"a\", y)"] end,
             fun(N) -> ["Enum.map(:\"nope", N, "#{1}\", y)"] end,
             fun(N) -> ["Enum.map(x, y) when @nope", N] end],
    Run = fun(From, To) ->
                  [begin
                       Text = unicode:characters_to_list(F(integer_to_list(I))),
                       R = tracekit_spec:resolve(Text),
                       ?assertMatch({_, _}, R)
                   end || I <- lists:seq(From, To), F <- Forms]
          end,
    %% Once for the modules that the errors load.
    Run(1, 2),
    Before = erlang:system_info(atom_count),
    Run(3, 3002),
    {erlang:system_info(atom_count) - Before, 3000 * length(Forms)}.

%% A name that is not an atom yet but is one of the spec's module (on the
%% code path, not loaded): the module is loaded and the spec read again.
%% The module is compiled by erlc, so that its atoms are not this node's.
atoms_of_a_module_not_loaded_yet(Config) ->
    Id = integer_to_list(erlang:unique_integer([positive])) ++ "_"
        ++ integer_to_list(erlang:phash2(make_ref())),
    Mod = "tk_elixir_late_" ++ Id,
    Atom = "tk_late_atom_" ++ Id,
    Dir = filename:join(?config(priv_dir, Config), "late"),
    ok = filelib:ensure_path(Dir),
    Src = filename:join(Dir, Mod ++ ".erl"),
    ok = file:write_file(Src, io_lib:format("-module(~s).~n-export([f/1]).~nf(~s) -> ok.~n",
                                            [Mod, Atom])),
    Erlc = filename:join([code:root_dir(), "bin", "erlc"]),
    Out = os:cmd(Erlc ++ " -o " ++ Dir ++ " " ++ Src),
    ?assertEqual({"", true}, {Out, filelib:is_file(filename:join(Dir, Mod ++ ".beam"))}),
    true = code:add_patha(Dir),
    try
        ?assertError(badarg, list_to_existing_atom(Mod)),
        Spec = ":" ++ Mod ++ ".f(:" ++ Atom ++ ") -> return",
        {ok, [{#{match_spec := MS}, _}]} = tracekit_spec:resolve(Spec),
        ?assertEqual([{[list_to_existing_atom(Atom)], [], [{return_trace}]}], MS)
    after
        code:del_path(Dir)
    end.

%% A node without tracekit, lent it (tracekit_push), and without Elixir:
%% a trace started from this node, which has Elixir, prints its calls in
%% Elixir syntax (the lines are made here), and a spec in Elixir syntax
%% selects there what it says.
lent_node_prints_elixir(Config) ->
    Dist = case node() of
               nonode@nohost ->
                   _ = os:cmd("epmd -daemon"),
                   timer:sleep(200),
                   {ok, _} = net_kernel:start(tracekit_elixir_ct, #{name_domain => shortnames}),
                   true;
               _ ->
                   false
           end,
    Io = ?config(io, Config),
    {ok, Peer, Node} = peer:start_link(#{name => peer:random_name(?MODULE)}),
    try
        ?assertEqual(non_existing, erpc:call(Node, code, which, [tracekit_agent])),
        ?assertEqual(non_existing, erpc:call(Node, code, which, ['Elixir.Code'])),
        {ok, T} = tracekit:calls(":lists.seq(1, n) when n > 2 -> return",
                                 #{nodes => [Node], io => Io, max_events => 2,
                                   syntax => elixir, colour => false}),
        [1, 2] = erpc:call(Node, lists, seq, [1, 2]),
        [1, 2, 3] = erpc:call(Node, lists, seq, [1, 3]),
        {ok, _} = tracekit:wait(T, 10000),
        Lines = tk_capture:lines(Io),
        ct:log("~p", [Lines]),
        Node1 = atom_to_list(Node),
        Re = fun(What) -> "^" ++ Node1 ++ " [0-9:.]+ #PID<[0-9.]+> " ++ What ++ "$" end,
        ?assertMatch([_], [L || L <- Lines, re:run(L, Re(":lists\\.seq\\(1, 3\\)")) =/= nomatch]),
        ?assertMatch([_], [L || L <- Lines,
                                re:run(L, Re(":lists\\.seq/2 -> \\[1, 2, 3\\]")) =/= nomatch]),
        ?assertEqual([], [L || L <- Lines, string:find(L, "seq(1, 2)") =/= nomatch])
    after
        peer:stop(Peer),
        _ = [net_kernel:stop() || Dist]
    end.
