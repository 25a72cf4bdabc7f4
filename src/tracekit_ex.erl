%% @private
%% @doc The Elixir tracekit uses, at run time only: whether Elixir is
%% loaded, and Elixir's text of modules, functions and terms. tracekit has
%% no compile-time dependency on Elixir: every call here goes through
%% `code:ensure_loaded/1' first, and the callers fall back to Erlang's text
%% (or say that Elixir is needed) when it is not there.
-module(tracekit_ex).

-export([loaded/0, iex/0, module/1, function/1, mfa/3, mf/2, inspect/1, inspect/2,
         string_to_quoted/1, new_atom/1, to_string/1, mix_build_path/0]).

%% The only module of tracekit that calls Elixir: xref and dialyzer do
%% not know Elixir's modules.
-ignore_xref([{'Elixir.Kernel', inspect, 1}, {'Elixir.Kernel', inspect, 2},
              {'Elixir.Macro', inspect_atom, 2}, {'Elixir.Macro', to_string, 1},
              {'Elixir.Code', string_to_quoted, 2}, {'Elixir.IEx', 'started?', 0},
              {'Elixir.Mix.Project', get, 0}, {'Elixir.Mix.Project', build_path, 0}]).
-dialyzer({no_unknown, [iex/0, module/1, function/1, inspect/1, inspect/2,
                        string_to_quoted/1, to_string/1, mix_build_path/0]}).

%% Containers larger than this are cut before inspect sees them (it would
%% sort a map of a million keys to show 50 of them), and inspect is given
%% no more than this many parts of a term.
-define(BIG, 1024).
%% What a name that is not an atom is written as by Macro.to_string/1,
%% before the name is put in its place.
-define(STAND_IN, tracekit_new_atom).
-define(WALK, 10000).

%% @doc Whether Elixir's modules can be called in this node (its `elixir'
%% application in the code path; loading it is enough).
-spec loaded() -> boolean().
loaded() ->
    Ms = ['Elixir.Code', 'Elixir.Kernel', 'Elixir.Macro'],
    lists:all(fun(M) -> erlang:module_loaded(M) orelse code:ensure_loaded(M) =:= {module, M} end,
              Ms).

%% @doc Whether the shell of this node is iex.
-spec iex() -> boolean().
iex() ->
    code:ensure_loaded('Elixir.IEx') =:= {module, 'Elixir.IEx'}
        andalso erlang:function_exported('Elixir.IEx', 'started?', 0)
        andalso 'Elixir.IEx':'started?'() =:= true.

%% @doc A module as Elixir writes it: `MyApp.Server', `:lists'.
-spec module(atom()) -> binary().
module(M) ->
    'Elixir.Kernel':inspect(M).

%% @doc A term as Kernel.inspect/1 prints it.
-spec inspect(term()) -> binary().
inspect(T) ->
    'Elixir.Kernel':inspect(T).

%% @doc Elixir's AST of a text (Code.string_to_quoted/2, without
%% warnings, with columns), making no atom: a name that is not an atom of
%% this node (an alias, a variable, a function, an atom) is `#{new_atom
%% => Text}' in the AST (see {@link new_atom/1}), and an atom that would
%% be made at run time (`:"a#{b}"') is a syntax error. Text is the user's:
%% atoms are never collected, and a stream of specs would fill the table.
-spec string_to_quoted(binary()) -> {ok, term()} | {error, term()}.
string_to_quoted(Text) ->
    Encode = fun(Name, _Meta) ->
                     try {ok, binary_to_existing_atom(Name, utf8)}
                     catch error:badarg -> {ok, #{new_atom => Name}}
                     end
             end,
    'Elixir.Code':string_to_quoted(Text, [{emit_warnings, false}, {columns, true},
                                          {existing_atoms_only, true},
                                          {static_atoms_encoder, Encode}]).

%% @doc `{true, Text}' for the stand-in of a name that is not an atom (in
%% an AST of {@link string_to_quoted/1}), else false.
-spec new_atom(term()) -> {true, binary()} | false.
new_atom(#{new_atom := Name}) when is_binary(Name) -> {true, Name};
new_atom(_) -> false.

%% @doc The code of an AST (Macro.to_string/1), the names that are not
%% atoms (see {@link string_to_quoted/1}) written as they were given.
-spec to_string(term()) -> binary().
to_string(Ast) ->
    {Ast1, Names} = stand_ins(Ast, []),
    Text = 'Elixir.Macro':to_string(Ast1),
    case Names of
        [] -> Text;
        _ -> fill(binary:split(Text, atom_to_binary(?STAND_IN), [global]), lists:reverse(Names))
    end.

%% The AST with each name that is not an atom replaced by ?STAND_IN (an
%% atom that Macro.to_string/1 writes as it is, as an alias, a variable,
%% a function or after a colon), and those names in reverse order.
stand_ins(#{new_atom := Name}, Acc) when is_binary(Name) ->
    {?STAND_IN, [Name | Acc]};
stand_ins(T, Acc) when is_tuple(T) ->
    {L, Acc1} = stand_ins(tuple_to_list(T), Acc),
    {list_to_tuple(L), Acc1};
stand_ins([H | T], Acc) ->
    {H1, Acc1} = stand_ins(H, Acc),
    {T1, Acc2} = stand_ins(T, Acc1),
    {[H1 | T1], Acc2};
stand_ins(X, Acc) ->
    {X, Acc}.

%% The parts of the text between stand-ins, each stand-in its name (in
%% the order Macro.to_string/1 wrote them, which is the AST's).
fill([Part], _) -> Part;
fill([Part | Parts], [Name | Names]) -> <<Part/binary, Name/binary, (fill(Parts, Names))/binary>>;
fill([Part | Parts], []) -> <<Part/binary, (atom_to_binary(?STAND_IN))/binary, (fill(Parts, []))/binary>>.

%% @doc The build directory of the Mix project being built, or none.
-spec mix_build_path() -> string() | none.
mix_build_path() ->
    try code:ensure_loaded('Elixir.Mix.Project') of
        {module, _} ->
            case 'Elixir.Mix.Project':get() of
                nil -> none;
                _ -> unicode:characters_to_list('Elixir.Mix.Project':build_path())
            end;
        _ -> none
    catch _:_ -> none
    end.

%% @doc A function name as Elixir writes it after a dot: `handle_call',
%% `"weird name"'.
-spec function(atom()) -> binary().
function(F) ->
    'Elixir.Macro':inspect_atom(remote_call, F).

%% @doc `Module.function/arity' as Elixir writes it.
-spec mfa(atom(), atom(), arity() | '_') -> unicode:chardata().
mfa(M, F, A) ->
    [mf(M, F), "/", case A of '_' -> "_"; _ -> integer_to_list(A) end].

%% @doc `Module.function' as Elixir writes it (`_' for every function).
-spec mf(atom(), atom()) -> unicode:chardata().
mf(M, '_') -> [module(M), "._"];
mf(M, F) -> [module(M), ".", function(F)].

%% @doc A term in Elixir syntax by Kernel.inspect/2: `Limit' its `limit'
%% (items of collections, shared by the nested ones), `Printable' its
%% `printable_limit' (characters of strings and charlists), on one line.
%% Huge containers are cut first (inspect would look at every element of
%% a map), keeping enough for inspect to print its `...'.
-spec inspect(term(), #{limit := pos_integer(), printable_limit := pos_integer()}) ->
          binary().
inspect(T, #{limit := Limit, printable_limit := Printable}) ->
    {T1, _} = cut(T, Limit, ?WALK),
    'Elixir.Kernel':inspect(T1, [{limit, Limit}, {printable_limit, Printable},
                                 {pretty, false}, {width, infinity}]).

%% The term with containers of more than ?BIG elements cut to Limit + 1
%% of them, and no more than Budget parts looked at (the rest become
%% '...', which inspect never reaches with a limit far below the budget).
cut(_T, _Limit, B) when B =< 0 ->
    {'...', 0};
cut(L, Limit, B) when is_list(L) ->
    cut_list(take(L, ?BIG, Limit), Limit, B - 1, []);
cut(T, Limit, B) when is_tuple(T) ->
    Es = case tuple_size(T) > ?BIG of
             true -> [element(I, T) || I <- lists:seq(1, Limit + 1)];
             false -> tuple_to_list(T)
         end,
    {Es1, B1} = cut_list(Es, Limit, B - 1, []),
    {list_to_tuple(Es1), B1};
cut(M, Limit, B) when is_map(M) ->
    KVs = case map_size(M) > ?BIG of
              true -> first(maps:next(maps:iterator(M)), Limit + 1);
              false -> maps:to_list(M)
          end,
    {KVs1, B1} = lists:mapfoldl(fun({K, V}, Acc) ->
                                        {K1, Acc1} = cut(K, Limit, Acc),
                                        {V1, Acc2} = cut(V, Limit, Acc1),
                                        {{K1, V1}, Acc2}
                                end, B - 1, KVs),
    {maps:from_list(KVs1), B1};
cut(Bin, Limit, B) when is_bitstring(Bin), byte_size(Bin) > ?BIG * 4 ->
    <<Part:(?BIG * 4)/binary, _/bitstring>> = Bin,
    {whole_chars(Part), max(0, B - 1 - Limit)};
cut(X, _Limit, B) ->
    {X, B - 1}.

%% A part of a binary that ends inside a UTF-8 character ends before it
%% (inspect prints it as a string, not as bytes).
whole_chars(Part) ->
    case unicode:characters_to_binary(Part) of
        {incomplete, Whole, _} -> Whole;
        _ -> Part
    end.

%% Lists: the proper part and the tail.
cut_list([H | T], Limit, B, Acc) ->
    {H1, B1} = cut(H, Limit, B),
    cut_list(T, Limit, B1, [H1 | Acc]);
cut_list([], _Limit, B, Acc) ->
    {lists:reverse(Acc), B};
cut_list(Tail, Limit, B, Acc) ->
    {T1, B1} = cut(Tail, Limit, B),
    {lists:reverse(Acc, T1), B1}.

%% A list of more than Big elements: its first Limit + 1 (a proper list).
take(L, Big, Limit) ->
    case longer(L, Big) of
        true -> lists:sublist(L, Limit + 1);
        false -> L
    end.

longer(_, 0) -> true;
longer([_ | T], N) -> longer(T, N - 1);
longer(_, _) -> false.

first(none, _) -> [];
first(_, 0) -> [];
first({K, V, I}, N) -> [{K, V} | first(maps:next(I), N - 1)].
