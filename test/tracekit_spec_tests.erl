-module(tracekit_spec_tests).

-include_lib("eunit/include/eunit.hrl").

-export([f/1, f/2, g/0]).

%% Functions to resolve specs against.
f(X) -> X.
f(X, Y) -> {X, Y}.
g() -> ok.

one(Spec) ->
    {ok, [C]} = tracekit_spec:parse(Spec),
    C.

ms(Spec) ->
    maps:get(match_spec, one(Spec)).

%% The reason of a bad spec; also checks that it carries an example.
why(Spec) ->
    {error, {bad_spec, _, Why}} = tracekit_spec:parse(Spec),
    ?assert(string:find(Why, "for example") =/= nomatch),
    Why.

starts(Prefix, Text) ->
    ?assertEqual(Prefix, lists:sublist(Text, length(Prefix))).

%%% Forms without patterns ----------------------------------------------------

mfa_forms_test_() ->
    [?_assertMatch(#{module := lists, function := seq, arity := 2,
                     match_spec := [{'_', [], []}], return := false,
                     exception := false, text := "lists:seq/2"},
                   one("lists:seq/2")),
     ?_assertMatch(#{module := lists, function := seq, arity := '_'}, one("lists:seq")),
     ?_assertMatch(#{module := mymod, function := '_', arity := '_'}, one("mymod:_")),
     ?_assertMatch(#{module := mymod, function := '_', arity := '_'}, one("mymod")),
     ?_assertMatch(#{module := mymod, function := '_', arity := 3}, one("mymod:_/3")),
     ?_assertMatch(#{module := m, function := f, arity := '_'}, one("m:f/_")),
     ?_assertMatch(#{module := 'my mod', function := 'F'}, one("'my mod':'F'/1")),
     ?_assertMatch(#{arity := 0}, one("m:f()")),
     ?_assertMatch(#{module := m}, one(<<"m:f/1">>)),
     ?_assertMatch(#{module := m}, one("  m:f/1  "))].

actions_test_() ->
    [?_assertMatch(#{return := true, exception := false,
                     match_spec := [{'_', [], [{return_trace}]}]},
                   one("m:f/1 -> return")),
     ?_assertMatch(#{return := false, exception := true,
                     match_spec := [{'_', [], [{exception_trace}]}]},
                   one("m:f/1 -> exception")),
     ?_assertMatch(#{return := true, exception := true,
                     match_spec := [{'_', [], [{exception_trace}]}]},
                   one("m:f/1 -> return, exception")),
     ?_assertMatch(#{return := true, exception := true},
                   one("m:f/1->exception,return"))].

%%% Argument patterns ----------------------------------------------------------

patterns_test_() ->
    [?_assertEqual([{[{get, '_'}, '_', '_'], [], []}],
                   ms("mymod:handle_call({get, _}, _, _)")),
     ?_assertEqual([{['$1', '$2', '$1'], [], []}], ms("m:f(A, B, A)")),
     ?_assertEqual([{['$1'], [], []}], ms("m:f(_Ignored)")),
     ?_assertEqual([{[[1, 2 | '$1']], [], []}], ms("m:f([1, 2 | T])")),
     ?_assertEqual([{["abc", <<"bin">>, $x, 1.5, -3, []], [], []}],
                   ms("m:f(\"abc\", <<\"bin\">>, $x, 1.5, -3, [])")),
     ?_assertEqual([{[#{k => '$1', {a, 1} => '_'}], [], []}],
                   ms("m:f(#{k := V, {a, 1} := _})")),
     ?_assertEqual([{[{a, {b, ['$1']}}], [], [{return_trace}]}],
                   ms("m:f({a, {b, [X]}}) -> return"))].

%% The match specs really select what they say, on the VM.
patterns_match_on_the_vm_test_() ->
    Test = fun(Spec, Args) ->
                   {ok, R, _, _} = erlang:match_spec_test(Args, ms(Spec), trace),
                   R
           end,
    [?_assertEqual(true, Test("m:f({get, _}, _)", [{get, 1}, x])),
     ?_assertEqual(false, Test("m:f({get, _}, _)", [{put, 1}, x])),
     ?_assertEqual(true, Test("m:f(A, A)", [7, 7])),
     ?_assertEqual(false, Test("m:f(A, A)", [7, 8])),
     ?_assertEqual(true, Test("m:f(#{k := 1})", [#{k => 1, j => 2}])),
     ?_assertEqual(false, Test("m:f(#{k := 1})", [#{j => 2}])),
     ?_assertEqual(true, Test("m:f(N) when N > 10", [11])),
     ?_assertEqual(false, Test("m:f(N) when N > 10", [10])),
     ?_assertEqual(true, Test("m:f(N) when N > 10; is_atom(N)", [a])),
     ?_assertEqual(false, Test("m:f(N) when N > 10, is_atom(N)", [11])),
     ?_assertEqual(true, Test("m:f(T) when element(1, T) =:= {x, 1}", [{{x, 1}}])),
     ?_assertEqual(true, Test("m:f(L, N) when length(L) >= N andalso N > 0", [[a, b], 2])),
     ?_assertEqual(false, Test("m:f(L, N) when length(L) >= N andalso N > 0", [[a], 2])),
     ?_assertEqual(true, Test("m:f(M) when map_get(k, M) == 1.0", [#{k => 1}])),
     ?_assertEqual(true, Test("m:f(X) when not is_list(X)", [1])),
     ?_assertEqual(true, Test("m:f(X) when X =:= -1", [-1])),
     ?_assertEqual(true, Test("m:f(X) when X =:= [a, \"b\"]", [[a, "b"]])),
     ?_assertEqual(true, Test("m:f(X, Y) when {X, Y} =:= {1, 2}", [1, 2])),
     ?_assertEqual(true, Test("m:f(X, Y) when [X | Y] =:= [1, 2]", [1, [2]])),
     ?_assertEqual(true, Test("m:f(X) when erlang:is_integer(X)", [3])),
     ?_assertEqual(true, Test("m:f(X) when X band 1 =:= 1, -X < 0", [3]))].

guards_test_() ->
    [?_assertEqual([{['$1'], [{'>', '$1', 3}], []}], ms("m:f(N) when N > 3")),
     ?_assertEqual([{['$1'], [{'>', '$1', 3}, {is_integer, '$1'}], []},
                    {['$1'], [{is_atom, '$1'}], []}],
                   ms("m:f(N) when N > 3, is_integer(N); is_atom(N)")),
     ?_assertEqual([{['$1'], [{'=:=', '$1', {const, ok}}], [{return_trace}]}],
                   ms("m:f(R) when R =:= ok -> return"))].

%%% Callers and stacks --------------------------------------------------------

stack_actions_test_() ->
    Caller = {message, {{caller, {caller}}}},
    Stack = fun(N) -> {message, {{stack, {current_stacktrace, N}}}} end,
    [?_assertMatch(#{stack := none}, one("m:f/1")),
     ?_assertMatch(#{stack := none}, one("m:f/1 -> return")),
     ?_assertMatch(#{stack := caller, return := false, match_spec := [{'_', [], [Caller]}]},
                   one("m:f/1 -> caller")),
     %% One frame more than the depth: the printer says when there were more.
     ?_assertMatch(#{stack := stack, match_spec := [{'_', [], [{message, {{stack, {current_stacktrace, 9}}}}]}]},
                   one("m:f/1 -> stack")),
     ?_assertMatch(#{stack := stack, return := true, exception := false},
                   one("m:f/1 -> return, stack")),
     ?_assertEqual([{'_', [], [Stack(9), {return_trace}]}], ms("m:f/1 -> return, stack")),
     ?_assertEqual([{'_', [], [Caller, {exception_trace}]}], ms("m:f/1 -> exception, caller")),
     ?_assertEqual([{'_', [], [Caller, {exception_trace}]}], ms("m:f/1->caller,exception,return")),
     %% Both: the stack, whose first frame is the caller.
     ?_assertEqual([{'_', [], [Stack(9)]}], ms("m:f/1 -> caller, stack")),
     ?_assertEqual([{'_', [], [Stack(9)]}], ms("m:f/1 -> stack, caller")),
     ?_assertEqual([{['$1'], [{'>', '$1', 1}], [Stack(9), {return_trace}]}],
                   ms("m:f(N) when N > 1 -> stack, return")),
     ?_assertMatch({ok, [#{match_spec := [{'_', [], [{message, {{stack, {current_stacktrace, 4}}}}]}]}]},
                   tracekit_spec:parse("m:f/1 -> stack", #{stack_depth => 3})),
     ?_assertMatch({ok, [#{match_spec := [{'_', [], [{message, {{stack, {current_stacktrace, 2}}}}]}]},
                         #{match_spec := [{'_', [], [{message, {{stack, {current_stacktrace, 2}}}}]}]}]},
                   tracekit_spec:parse(["m:f/1 -> stack", <<"m:g -> stack">>], #{stack_depth => 1})),
     ?_assertMatch({ok, [{#{stack := caller}, [{tracekit_spec_tests, f, 1}]}]},
                   tracekit_spec:resolve("tracekit_spec_tests:f/1 -> caller", #{stack_depth => 2})),
     %% Terms are taken as written.
     ?_assertMatch(#{stack := none}, one({m, f, 1, [{'_', [], [Caller]}]})),
     ?_assertError(badarg, tracekit_spec:parse("m:f/1", #{stack_depth => 0})),
     ?_assertError(badarg, tracekit_spec:parse("m:f/1", #{stack_depth => 65})),
     ?_assertError(badarg, tracekit_spec:parse("m:f/1", #{stack_depth => x})),
     ?_assertError(badarg, tracekit_spec:parse("m:f/1", [])),
     ?_assertError(badarg, tracekit_spec:resolve("m:f/1", #{stack_depth => -1}))].

%% The match specs of -> caller and -> stack are valid for call tracing
%% (match_spec_test/3 is safe with them: no flag actions).
stack_actions_on_the_vm_test_() ->
    Test = fun(Spec, Args) ->
                   erlang:match_spec_test(Args, ms(Spec), trace)
           end,
    [?_assertMatch({ok, {caller, _}, [], []}, Test("m:f/1 -> caller", [1])),
     ?_assertMatch({ok, {stack, [_ | _]}, _, _}, Test("m:f/1 -> return, stack", [1])),
     ?_assertMatch({ok, false, [], []}, Test("m:f(2) -> stack", [1])),
     ?_test(begin
                {ok, {stack, Frames}, [], []} =
                    erlang:match_spec_test([1], maps:get(match_spec, one("m:f/1 -> stack")), trace),
                ?assert(length(Frames) =< 9),
                [?assertMatch({M, F, A, L} when is_atom(M) andalso is_atom(F)
                                                andalso is_integer(A) andalso is_list(L), Fr)
                 || Fr <- Frames]
            end)].

%%% Maps ----------------------------------------------------------------------

maps_test_() ->
    [?_assertEqual([{[#{op => get}, '_', '_'], [], []}],
                   ms("m:handle_call(#{op := get}, _, _)")),
     ?_assertEqual([{[#{op => '$1'}, '_'], [{'=/=', '$1', {const, put}}], []}],
                   ms("m:f(#{op := Op}, _) when Op =/= put")),
     ?_assertEqual([{[#{a => #{b => '$1'}}], [{'>', '$1', 1}], [{return_trace}]}],
                   ms("m:f(#{a := #{b := X}}) when X > 1 -> return")),
     ?_assertEqual([{[#{}], [], []}], ms("m:f(#{})")),
     ?_assertEqual([{[{'$1', #{k => '$1'}}], [], []}], ms("m:f({V, #{k := V}})")),
     ?_assertEqual([{['$1'], [{'>', {map_get, {const, k}, '$1'}, 1}], []}],
                   ms("m:f(M) when map_get(k, M) > 1")),
     ?_assertEqual([{['$1', '$2'], [{is_map_key, '$2', '$1'}], []}],
                   ms("m:f(M, K) when is_map_key(K, M)")),
     ?_assertEqual([{['$1'], [{'=:=', {map_size, '$1'}, 0}], []}],
                   ms("m:f(M) when map_size(M) =:= 0")),
     ?_assertEqual([{['$1'], [{'=:=', '$1', {const, #{a => 1}}}], []}],
                   ms("m:f(M) when M =:= #{a => 1}")),
     ?_assertEqual([{['$1', '$2'], [{'=:=', '$1', #{{const, k} => '$2',
                                                    {const, {a, 1}} => ['$2' | {const, []}]}}], []}],
                   ms("m:f(M, V) when M =:= #{k => V, {a, 1} => [V]}")),
     ?_assertEqual([{['$1', '$2'], [{'=:=', '$1', #{'$2' => 1}}], []}],
                   ms("m:f(M, K) when M =:= #{K => 1}")),
     ?_test(starts("argument pattern K is not supported: map keys must be literals",
                   why("m:f(#{K := 1}, K)")))].

%% The map specs select what they say, on the VM.
maps_match_on_the_vm_test_() ->
    Test = fun(Spec, Args) ->
                   {ok, R, _, _} = erlang:match_spec_test(Args, ms(Spec), trace),
                   R
           end,
    H = "m:handle_call(#{op := get}, _, _)",
    [?_assertEqual(true, Test(H, [#{op => get, key => k}, from, state])),
     ?_assertEqual(false, Test(H, [#{op => put}, from, state])),
     ?_assertEqual(false, Test(H, [#{key => k}, from, state])),
     ?_assertEqual(false, Test(H, [{op, get}, from, state])),
     ?_assertEqual(true, Test("m:f(#{})", [#{a => 1}])),
     ?_assertEqual(false, Test("m:f(#{})", [[]])),
     ?_assertEqual(true, Test("m:f({V, #{k := V}})", [{1, #{k => 1}}])),
     ?_assertEqual(false, Test("m:f({V, #{k := V}})", [{1, #{k => 2}}])),
     ?_assertEqual(true, Test("m:f(#{a := #{b := X}}) when X > 1", [#{a => #{b => 2}}])),
     ?_assertEqual(false, Test("m:f(#{a := #{b := X}}) when X > 1", [#{a => #{b => 1}}])),
     ?_assertEqual(true, Test("m:f(M) when map_get(k, M) > 1", [#{k => 2}])),
     ?_assertEqual(false, Test("m:f(M) when map_get(k, M) > 1", [#{k => 1}])),
     %% map_get of a missing key fails the guard, and the call is not traced.
     ?_assertEqual(false, Test("m:f(M) when map_get(k, M) > 1", [#{j => 2}])),
     ?_assertEqual(false, Test("m:f(M) when map_get(k, M) > 1", [not_a_map])),
     ?_assertEqual(true, Test("m:f(M, K) when is_map_key(K, M)", [#{a => 1}, a])),
     ?_assertEqual(false, Test("m:f(M, K) when is_map_key(K, M)", [#{a => 1}, b])),
     ?_assertEqual(true, Test("m:f(M) when map_size(M) =:= 0", [#{}])),
     ?_assertEqual(true, Test("m:f(M) when M =:= #{a => 1}", [#{a => 1}])),
     ?_assertEqual(false, Test("m:f(M) when M =:= #{a => 1}", [#{a => 1, b => 2}])),
     ?_assertEqual(true, Test("m:f(M, V) when M =:= #{k => V, {a, 1} => [V]}",
                              [#{k => 3, {a, 1} => [3]}, 3])),
     ?_assertEqual(false, Test("m:f(M, V) when M =:= #{k => V, {a, 1} => [V]}",
                               [#{k => 3, {a, 1} => [4]}, 3])),
     ?_assertEqual(true, Test("m:f(M, K) when M =:= #{K => 1}", [#{x => 1}, x])),
     ?_assertEqual(true, Test("m:f(M) when is_map(M) andalso map_get(op, M) =:= get",
                              [#{op => get}]))].

%%% Terms and lists -----------------------------------------------------------

terms_test_() ->
    [?_assertMatch(#{module := m, function := f, arity := 1,
                     match_spec := [{'_', [], []}]}, one({m, f, 1})),
     ?_assertMatch(#{function := '_', arity := '_'}, one({m, '_', '_'})),
     ?_assertMatch(#{return := true, exception := false},
                   one({m, f, 1, [{'_', [], [{return_trace}]}]})),
     ?_assertMatch(#{return := true, exception := true},
                   one({m, f, 1, [{'_', [], [{exception_trace}]}]})),
     ?_assertMatch({ok, [#{function := seq}, #{function := f}, #{function := g}]},
                   tracekit_spec:parse(["lists:seq/2", {m, f, 1}, <<"m:g">>]))].

%%% Every error, with its message ---------------------------------------------

errors_test_() ->
    [?_test(starts("the spec is empty", why(""))),
     ?_test(starts("the spec is empty", why("   "))),
     ?_test(begin
                Why = why("m:f(\"abc"),
                starts("cannot read the spec at column ", Why),
                ?assert(string:find(Why, "unterminated string") =/= nomatch)
            end),
     ?_test(starts("syntax error at column 5: syntax error before: ','", why("m:f(,)"))),
     ?_test(starts("expected one function, got several", why("m:f, m:g"))),
     ?_test(starts("expected Module:Function, Module:Function/Arity or "
                   "Module:Function(ArgPatterns), got 1 + 2", why("1 + 2"))),
     ?_test(starts("the module cannot be _", why("_:f/1"))),
     ?_test(starts("the module must be an atom, got \"m\"", why("\"m\":f/1"))),
     ?_test(starts("M is not an atom in Erlang: quote a module whose name begins "
                   "with a capital, 'Elixir.M':f/1, or write the spec in Elixir "
                   "syntax, M.f/1", why("M:f/1"))),
     ?_test(starts("the function must be an atom or _, got F", why("m:F/1"))),
     ?_test(starts("the arity must be an integer from 0 to 255 or _, got 256",
                   why("m:f/256"))),
     ?_test(starts("the arity must be an integer from 0 to 255 or _, got x",
                   why("m:f/x"))),
     ?_test(starts("there is no function before the guard or the ->", why("-> return"))),
     ?_test(starts("nothing after ->", why("m:f/1 ->"))),
     ?_test(starts("unknown action trace after ->: use return, exception, caller or stack",
                   why("m:f/1 -> trace"))),
     ?_test(starts("unknown action 3 after ->", why("m:f/1 -> stack, 3"))),
     ?_test(starts("unexpected 4 after the action", why("m:f/1 -> stack 4"))),
     ?_test(starts("unexpected exception after the action", why("m:f/1 -> return exception"))),
     ?_test(starts("an action is missing after the comma", why("m:f/1 -> return,"))),
     ?_test(starts("a guard needs argument patterns", why("m:f/1 when X > 1"))),
     ?_test(starts("nothing after when", why("m:f(X) when"))),
     ?_test(starts("the guard ends too early", why("m:f(X) when X >"))),
     ?_test(starts("syntax error in the guard at column 14: syntax error before: ')'",
                   why("m:f(X) when X)"))),
     ?_test(starts("the spec ends too early (a bracket not closed?)", why("m:f({a, X"))),
     ?_test(starts("variable Y in the guard is not bound in the argument patterns",
                   why("m:f(X) when Y > 1"))),
     ?_test(starts("_ cannot be used in a guard", why("m:f(X) when _ > 1"))),
     ?_test(starts("foo/1 cannot be used in a guard (only guard BIFs",
                   why("m:f(X) when foo(X)"))),
     ?_test(starts("lists:member/2 cannot be used in a guard",
                   why("m:f(X) when lists:member(X, [1])"))),
     ?_test(starts("the operator ++ cannot be used in a guard",
                   why("m:f(X) when X ++ [] =:= []"))),
     ?_test(starts("the map field a := X builds no map: in a guard write Key => Value",
                   why("m:f(X) when #{a := X} =:= #{}"))),
     ?_test(starts("M#{a => 1} is not supported in a guard", why("m:f(M) when M#{a => 1} =:= M"))),
     ?_test(starts("argument pattern X = {a} is not supported: Var = Pattern",
                   why("m:f(X = {a})"))),
     ?_test(starts("argument pattern \"ab\" ++ T is not supported",
                   why("m:f(\"ab\" ++ T)"))),
     ?_test(starts("argument pattern #r{} is not supported: records are not known here: "
                   "write the tuple, {r, ...}", why("m:f(#r{})"))),
     ?_test(starts("argument pattern '$1' is not supported: atoms beginning with $",
                   why("m:f('$1')"))),
     ?_test(starts("argument pattern '_' is not supported", why("m:f('_')"))),
     ?_test(starts("argument pattern f(X) is not supported: use literals, variables",
                   why("m:f(f(X))"))),
     ?_test(starts("argument pattern X + 1 is not supported", why("m:f(X + 1)"))),
     ?_test(starts("argument pattern K is not supported: map keys must be literals",
                   why("m:f(#{K := 1})"))),
     ?_test(starts("the map field a => 1 uses =>", why("m:f(#{a => 1})"))),
     ?_test(starts("the module cannot be _", why({'_', f, 1}))),
     ?_test(starts("the module must be an atom, got \"m\"", why({"m", f, 1}))),
     ?_test(starts("the function must be an atom or _, got 1", why({m, 1, 1}))),
     ?_test(starts("the arity must be an integer from 0 to 255 or _, got -1",
                   why({m, f, -1}))),
     ?_test(starts("the match spec is not valid:", why({m, f, 1, [{'_', [{nope}], []}]}))),
     ?_test(starts("the match spec must be a list, got x", why({m, f, 1, x}))),
     ?_test(starts("{m,f} is not {Module, Function, Arity}", why({m, f}))),
     ?_test(starts("expected a string, {Module, Function, Arity}", why(42))),
     ?_test(starts("expected a string, {Module, Function, Arity} or "
                   "{Module, Function, Arity, MatchSpec} in the list", why(["m:f", 42]))),
     ?_test(starts("expected a proper list of specs", why(["m:f" | {m, f, 1}])))].

%% The offending spec is named in the error (the element of a list, not
%% the whole list).
error_names_the_spec_test() ->
    ?assertMatch({error, {bad_spec, "m:f/x", _}}, tracekit_spec:parse(["m:g/1", "m:f/x"])).

%%% Resolving against loaded code ----------------------------------------------

resolve_test_() ->
    M = ?MODULE,
    [?_assertMatch({ok, [{#{module := M}, [{M, f, 1}]}]},
                   tracekit_spec:resolve("tracekit_spec_tests:f/1")),
     ?_assertMatch({ok, [{_, [{M, f, '_'}]}]}, tracekit_spec:resolve("tracekit_spec_tests:f")),
     ?_assertMatch({ok, [{_, [{M, '_', '_'}]}]}, tracekit_spec:resolve("tracekit_spec_tests")),
     %% M:_/A is expanded into the functions of that arity.
     ?_test(begin
                {ok, [{_, MFAs}]} = tracekit_spec:resolve("tracekit_spec_tests:_/2"),
                ?assert(lists:member({M, f, 2}, MFAs)),
                ?assertEqual([], [X || {_, _, A} = X <- MFAs, A =/= 2])
            end),
     ?_test(begin
                {error, {bad_spec, _, Why}} = tracekit_spec:resolve("tracekit_spec_tests:f/3"),
                ?assertEqual("module tracekit_spec_tests has no function f/3; it has "
                             "f/1, f/2; for example \"tracekit_spec_tests:f/1\"", Why)
            end),
     ?_test(begin
                {error, {bad_spec, _, Why}} = tracekit_spec:resolve("tracekit_spec_tests:nope"),
                starts("module tracekit_spec_tests has no function nope; for example \"", Why)
            end),
     ?_test(begin
                {error, {bad_spec, _, Why}} = tracekit_spec:resolve("tracekit_spec_tests:_/9"),
                starts("module tracekit_spec_tests has no function of arity 9; for example", Why)
            end),
     ?_test(begin
                {error, {bad_spec, "no_such_module_tk:f/1", Why}} =
                    tracekit_spec:resolve("no_such_module_tk:f/1"),
                starts("module no_such_module_tk is not loaded and cannot be loaded (nofile)", Why),
                ?assert(string:find(Why, "for example") =/= nomatch)
            end)].

shows_return_test() ->
    {ok, Calls} = tracekit_spec:parse(["m:f/1 -> exception", "m:g -> return", "n:_"]),
    ?assertNot(tracekit_spec:shows_return(Calls, {m, f, 1})),
    ?assert(tracekit_spec:shows_return(Calls, {m, g, 3})),
    ?assertNot(tracekit_spec:shows_return(Calls, {n, h, 0})).

%%% Input that is not a spec -----------------------------------------------

%% A binary is read as UTF-8 text; one that is not says where it breaks.
binary_not_utf8_test_() ->
    [?_test(starts("the binary is not UTF-8 text: byte 1 is not part of a UTF-8 "
                   "character", why(<<255, 0>>))),
     ?_test(starts("the binary is not UTF-8 text: byte 6 is not part", why(<<"m:f/1", 255>>))),
     ?_test(starts("the binary is not UTF-8 text: it ends inside a character",
                   why(<<"m:f/", 16#c3>>))),
     ?_test(starts("the spec is empty", why(<<>>))),
     ?_assertMatch(#{module := 'mød', function := f}, one(<<"'mød':f/1"/utf8>>))].

%% A list of integers is a string even when io_lib would not print it.
strings_test_() ->
    [?_test(starts("the string has -1 in it, which is not a character", why([$m, -1]))),
     ?_test(starts("the string has 1114112 in it", why([$m, 16#110000]))),
     ?_assertMatch(#{module := m, function := f, arity := 1}, one([$m, $:, $f, $/, $1, 0]))].

%% The spec is named in the error whole, but the sentence stays short
%% whatever the term.
deep_terms_test_() ->
    Deep = lists:foldl(fun(_, T) -> {T} end, x, lists:seq(1, 100000)),
    [?_assert(length(why(Deep)) < 400),
     ?_assert(length(why({m, f, 1, Deep})) < 400),
     ?_assert(length(why({m, f, lists:seq(1, 100000)})) < 400),
     ?_assert(length(why({m, f, 1, [{'_', [], [{message, Deep}]}]})) < 1000)].

%% The -> of a fun in a guard is not the one before the actions.
fun_in_guard_test_() ->
    [?_test(starts("fun() ->", why("m:f(X) when X =:= fun() -> ok end"))),
     ?_assertMatch(#{return := true, match_spec := [{_, [{'=:=', '$1', {const, _}}], _}]},
                   one("m:f(X) when X =:= fun lists:seq/2 -> return"))].

shows_return_and_format_badarg_test_() ->
    {ok, Calls} = tracekit_spec:parse("m:f/1 -> return"),
    [?_assertError(badarg, tracekit_spec:shows_return(x, {m, f, 1})),
     ?_assertError(badarg, tracekit_spec:shows_return([x], {m, f, 1})),
     ?_assertError(badarg, tracekit_spec:shows_return(Calls, x)),
     ?_assertError(badarg, tracekit_spec:shows_return(Calls ++ x, {m, f, 2})),
     ?_assertError(badarg, tracekit_spec:format(x))].

%%% Match specs that change trace flags --------------------------------------

%% erlang:match_spec_test/3, which checks match specs, crashes the VM (OTP
%% 27 and 29) on a spec whose body runs trace/2,3, enable_trace/1,2 or
%% disable_trace/1,2: tracekit_spec checks those itself. They are read on
%% a peer node, so that a regression fails these tests instead of ending
%% the test run.
flag_actions_test_() ->
    {setup, fun start_peer/0, fun peer:stop/1,
     fun(Peer) ->
             Ok = fun(MS) -> ?_assertMatch({ok, [#{match_spec := MS}]}, on_peer(Peer, MS)) end,
             Bad = fun(Start, MS) ->
                           ?_test(begin
                                      {error, {bad_spec, _, Why}} = on_peer(Peer, MS),
                                      starts("the match spec is not valid: " ++ Start, Why)
                                  end)
                   end,
             [Ok([{'_', [], [{trace, [], [call]}]}]),
              Ok([{'_', [], [{trace, [call], [send, 'receive', timestamp]}]}]),
              Ok([{'_', [], [{enable_trace, send}]}]),
              Ok([{'_', [], [{disable_trace, call}, {return_trace}]}]),
              Ok([{['$1', '_'], [], [{trace, '$1', [], [send]}]}]),
              Ok([{'_', [], [{enable_trace, {self}, procs}]}]),
              Ok([{'_', [], [{enable_trace, self(), send}]}]),
              Ok([{'_', [], [{disable_trace, my_server, send}]}]),
              Ok([{'_', [], [{trace, {const, [call]}, []}]}]),
              %% Inside other expressions, in maps, as map keys.
              Ok([{'_', [], [{message, {enable_trace, call}}]}]),
              Ok([{'_', [], [#{{enable_trace, call} => {disable_trace, send}}]}]),
              Ok([{'_', [], [{'andalso', true, {trace, [], [send]}}]}]),
              %% Literals, not actions.
              Ok([{'_', [], [{const, {trace, [], [nonsense]}}]}]),
              Ok([{'_', [], [{message, {{trace, [], [nonsense]}}}]}]),
              Bad("in {trace,[],[nonsense]}: nonsense is not a trace flag; the flags are: all, ",
                  [{'_', [], [{trace, [], [nonsense]}]}]),
              Bad("in {enable_trace,nonsense}: nonsense is not a trace flag",
                  [{'_', [], [{message, {enable_trace, nonsense}}]}]),
              Bad("in {trace,[],[cpu_timestamp]}: cpu_timestamp cannot be set by a match spec",
                  [{'_', [], [{trace, [], [cpu_timestamp]}]}]),
              Bad("in {trace,[],[{{tracer,",
                  [{'_', [], [{trace, [], [{{tracer, self()}}]}]}]),
              Bad("in {trace,'$1',[]}: the flags must be a list of trace flags written out",
                  [{['$1', '_'], [], [{trace, '$1', []}]}]),
              Bad("in {trace,[],[call|send]}: the flags must be a list",
                  [{'_', [], [{trace, [], [call | send]}]}]),
              Bad("in {enable_trace,42,send}: the process 42 must be a pid, a registered name",
                  [{'_', [], [{enable_trace, 42, send}]}]),
              %% What match_spec_test/3 finds in the rest.
              Bad("Variable $9 is unbound", [{'_', [], [{trace, '$9', [], [call]}]}]),
              Bad("Special form 'enable_trace' called in guard context",
                  [{'_', [{enable_trace, call}], []}]),
              Bad("Special form 'trace' called with wrong number of arguments",
                  [{'_', [], [{trace}]}]),
              Bad("Match expression is not a proper list", [{'_', [], [{trace, [], [call]} | x]}]),
              %% ...and the peer is still up.
              ?_assertEqual(42, peer:call(Peer, erlang, abs, [-42]))]
     end}.

start_peer() ->
    {ok, Peer, _Node} = peer:start(#{connection => standard_io,
                                          args => ["-pa", filename:dirname(code:which(tracekit_spec))]}),
    Peer.

on_peer(Peer, MS) ->
    peer:call(Peer, tracekit_spec, parse, [{lists, seq, 2, MS}]).

%% A full stop at the end, as a shell command has, is left out; map keys
%% that a match spec takes for variables are refused with a reason.
full_stop_and_odd_map_keys_test_() ->
    [?_assertEqual(one("lists:seq/2"), (one("lists:seq/2."))#{text := "lists:seq/2"}),
     ?_assertMatch(#{return := true}, one("lists:seq/2 -> return.")),
     ?_assertMatch(#{match_spec := [{[1, '$1'], [{'>', '$1', 1}], []}]},
                   one("lists:seq(1, X) when X > 1 .")),
     ?_test(starts("the spec is empty", why("."))),
     ?_test(starts("the spec ends too early", why("lists:seq(."))),
     ?_test(starts("argument pattern '$1' is not supported: a map key cannot be",
                   why("lists:seq(#{'$1' := 1}, _)"))),
     ?_test(starts("argument pattern '_' is not supported: a map key cannot be",
                   why("lists:seq(#{'_' := 1}, _)"))),
     ?_assertMatch(#{match_spec := [{[#{'a$' := 1}, '_'], [], []}]},
                   one("lists:seq(#{'a$' := 1}, _)"))].
