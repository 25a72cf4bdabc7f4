%% @private
%% @doc Call specs in Elixir syntax: the Elixir front end of {@link
%% tracekit_spec}. A spec is read by Elixir's own parser
%% (`Code.string_to_quoted/2', called at run time when Elixir is loaded)
%% and its parts are turned into the abstract format that tracekit_spec
%% compiles into match specs, so the rules of match specs exist once.
%% ```
%% "Enum.map/2"                                  every call of Enum.map/2
%% "Enum.map", "MyApp.Server", "MyApp.Server._/3"   any arity, every function, arity 3
%% ":lists.seq/2"                                an Erlang module
%% "MyApp.Server.handle_call(%{op: :get}, _, _) -> return"
%% "String.split(s, \",\") when is_binary(s)"
%% "MyApp.Server.handle_call/3 -> stack"          actions as in Erlang specs
%% &MyApp.Server.handle_call/3                   a capture (a term, not a string)
%% '''
%% Which syntax a string is in is decided by its first character: `&', `:'
%% and a capital letter (an alias, `Enum') begin Elixir specs; an Erlang
%% spec begins with a lower-case or quoted atom. A capitalised name
%% followed by `:' (`Elixir.Enum:map/2') is Erlang with an unquoted module,
%% and is refused with the quoted form as a hint.
%%
%% Patterns: literals, variables, `_', tuples, lists (`[h | t]'), maps
%% (`%{op: :get}', keys literal), structs (`%MyApp.State{count: n}',
%% `%_{}'), `~c"..."' and `~s"..."'. A variable used twice must match the
%% same value. Guards: comparisons, arithmetic, `and', `or', `not', the
%% guard functions of Kernel (`is_binary/1', `elem/2', `map_size/1',
%% `is_map_key/2', `is_nil/1', `is_struct/1,2', `x in [..]', `x in a..b',
%% `map.field', ...) and `:erlang' guard BIFs; `when' may be repeated (one
%% guard or the other).
-module(tracekit_spec_ex).

-export([syntax/1, parse_string/1, parse_fun/1, fun_text/1, example/0,
         not_loaded/2, no_match/4]).

-define(EXAMPLE, "for example \"Enum.map/2\", "
        "\"MyApp.Server.handle_call({:get, _}, _, _) -> return\" or "
        "\"String.split(s, \\\",\\\") when is_binary(s)\"").

%% The longest spec read (Elixir's parser holds all of it at once).
-define(MAX_CHARS, 65536).

%% Erlang guard BIFs by their Elixir name (the same name and order).
-define(GUARD_FUNS,
        [{abs,1}, {bit_size,1}, {byte_size,1}, {ceil,1}, {floor,1}, {hd,1}, {tl,1},
         {is_atom,1}, {is_binary,1}, {is_bitstring,1}, {is_boolean,1}, {is_float,1},
         {is_function,1}, {is_function,2}, {is_integer,1}, {is_list,1}, {is_map,1},
         {is_number,1}, {is_pid,1}, {is_port,1}, {is_reference,1}, {is_tuple,1},
         {length,1}, {map_size,1}, {node,0}, {node,1}, {round,1}, {self,0},
         {trunc,1}, {tuple_size,1}, {binary_part,3}, {max,2}, {min,2}]).

-define(OPS, [{'==', '=='}, {'!=', '/='}, {'===', '=:='}, {'!==', '=/='}, {'<', '<'},
              {'>', '>'}, {'<=', '=<'}, {'>=', '>='}, {'+', '+'}, {'-', '-'},
              {'*', '*'}, {'/', '/'}, {'and', 'andalso'}, {'or', 'orelse'}]).

%% @doc The syntax of a spec string, by its first character (see the
%% module's description).
-spec syntax(string()) -> elixir | erlang.
syntax(S) ->
    case string:trim(S, leading) of
        [$& | _] -> elixir;
        [$:, C | _] when C =/= $: -> elixir;
        [C | _] = T when C >= $A, C =< $Z ->
            case string:trim(lists:dropwhile(fun alias_char/1, T), leading) of
                [$:, C2 | _] when C2 =/= $: -> erlang;
                [$:] -> erlang;
                _ -> elixir
            end;
        _ -> erlang
    end.

alias_char(C) ->
    (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
        orelse (C >= $0 andalso C =< $9) orelse C =:= $_ orelse C =:= $.
        orelse C =:= $@.

%% @doc The example that ends every error about an Elixir spec.
-spec example() -> string().
example() ->
    ?EXAMPLE.

%% @doc Reads an Elixir spec string: the parts of its call that
%% tracekit_spec compiles (in Erlang's abstract format) and the text of
%% its actions (`none' without `->'), which tracekit_spec reads.
-spec parse_string(string()) -> {ok, map(), string() | none} | {error, iodata()}.
parse_string(S) when length(S) > ?MAX_CHARS ->
    {error, io_lib:format("the spec is longer than ~w characters", [?MAX_CHARS])};
parse_string(S) ->
    case tracekit_ex:loaded() of
        false ->
            {error, ["the spec is in Elixir syntax, and Elixir is not loaded in this node: "
                     "write it in Erlang syntax (", erlang_hint(S), ")"]};
        true ->
            {Head, ActionText} = split_actions(S),
            maybe
                {ok, Ast} ?= quoted(Head),
                {ok, Parts} ?= read(Head, Ast),
                {ok, Parts#{text => string:trim(S), syntax => elixir}, ActionText}
            end
    end.

%% The Erlang form of a simple spec, as a hint.
erlang_hint(S) ->
    {Name, Rest} = lists:splitwith(fun alias_char/1, string:trim(S, leading, "&: ")),
    Arity = case Rest of
                "/" ++ _ -> lists:takewhile(fun(C) -> C =:= $/ orelse (C >= $0 andalso C =< $9)
                                                                orelse C =:= $_ end, Rest);
                _ -> ""
            end,
    case string:lexemes(Name, ".") of
        [_, _ | _] = Parts when hd(hd(Parts)) >= $A, hd(hd(Parts)) =< $Z ->
            {Mod, [F]} = lists:split(length(Parts) - 1, Parts),
            io_lib:format("'Elixir.~ts':~ts~ts", [lists:join(".", Mod -- ["Elixir"]), F, Arity]);
        [M, F] ->
            io_lib:format("~ts:~ts~ts", [M, F, Arity]);
        _ ->
            "'Elixir.Enum':map/2 for Enum.map/2"
    end.

%% The spec and the text of its actions (none): the part after the last
%% `->' when it holds only words and commas (return, stack, ...).
split_actions(S) ->
    case string:split(S, "->", trailing) of
        [Head, Actions] ->
            case lists:all(fun(C) -> alias_char(C) orelse C =:= $, orelse C =:= $\s
                                         orelse C =:= $\t end, Actions) of
                true -> {Head, Actions};
                false -> {S, none}
            end;
        _ ->
            {S, none}
    end.

%% The parts of the call of a spec's AST. A name that is not an atom yet
%% may be one once the spec's module is loaded (its literals, its
%% functions): then the module is loaded, as tracing it would, and the
%% text read again.
read(Head, Ast) ->
    case call_parts(Ast) of
        {error, _} = E ->
            case has_new_atom(Ast) andalso load_head(Ast) of
                true ->
                    maybe
                        {ok, Ast1} ?= quoted(Head),
                        call_parts(Ast1)
                    end;
                false ->
                    E
            end;
        Ok ->
            Ok
    end.

call_parts(Ast) ->
    try {ok, call(Ast)}
    catch throw:{spec, Why} -> {error, Why}
    end.

has_new_atom(T) when is_map(T) -> tracekit_ex:new_atom(T) =/= false;
has_new_atom(T) when is_tuple(T) -> has_new_atom(tuple_to_list(T));
has_new_atom([H | T]) -> has_new_atom(H) orelse has_new_atom(T);
has_new_atom(_) -> false.

%% Whether the module of the call was loaded now.
load_head({'when', _, [Call, _]}) -> load_head(Call);
load_head({'/', _, [Fun, _]}) -> load_head(Fun);
load_head({{'.', _, [Mod, _]}, _, Args}) when is_list(Args) ->
    try module(Mod) of
        {ok, M} -> not erlang:module_loaded(M) andalso code:ensure_loaded(M) =:= {module, M};
        error -> false
    catch
        throw:{spec, _} -> false
    end;
load_head(_) -> false.

%% Elixir's AST of the text, or the parser's error as a sentence.
quoted(Text) ->
    case string:trim(Text) of
        "" ->
            {error, "there is no function before the ->"};
        T ->
            T1 = case T of [$& | Rest] -> Rest; _ -> T end,
            try tracekit_ex:string_to_quoted(unicode:characters_to_binary(T1)) of
                {ok, Ast} -> {ok, Ast};
                {error, {Meta, Msg, Token}} -> {error, syntax_error(Meta, Msg, Token)}
            catch
                _:Why -> {error, io_lib:format("Elixir's parser failed: ~0tP", [Why, 10])}
            end
    end.

syntax_error(Meta, Msg, Token) ->
    Col = case Meta of
              L when is_list(L) -> proplists:get_value(column, L);
              _ -> undefined
          end,
    Text = case Token of
               <<>> -> "the spec ends too early (a bracket not closed?)";
               _ -> [message(Msg), message(Token)]
           end,
    case Col of
        undefined -> ["syntax error: ", Text];
        _ -> io_lib:format("syntax error at column ~w: ~ts", [Col, Text])
    end.

message({Prefix, Suffix}) -> [message(Prefix), message(Suffix)];
message(B) when is_binary(B) -> B;
message(L) when is_list(L) -> L;
message(X) -> io_lib:format("~tp", [X]).

%%% The call --------------------------------------------------------------

call({'when', _, [Call, Guard]}) ->
    Parts = call(Call),
    case Parts of
        #{args := none} ->
            throw({spec, "a guard needs argument patterns to refer to: write "
                   "MyApp.Server.handle_call(request, from, state) when ..."});
        _ ->
            Parts#{guards := [[guard(G)] || G <- whens(Guard)]}
    end;
call({'/', _, [Fun, Arity]}) ->
    {M, F} = remote(Fun, no_args),
    A = case Arity of
            N when is_integer(N), N >= 0, N =< 255 -> N;
            {'_', _, Ctx} when is_atom(Ctx) -> '_';
            _ -> throw({spec, ["the arity must be an integer from 0 to 255 or _, got ",
                               code(Arity)]})
        end,
    parts(M, F, A, none);
call({{'.', _, [_, _]}, Meta, Args} = Call) when is_list(Args) ->
    case proplists:get_value(no_parens, Meta, false) of
        true ->
            {M, F} = remote(Call, no_args),
            parts(M, F, '_', none);
        false ->
            {M, F} = remote(Call, args),
            parts(M, F, length(Args), [pattern(A) || A <- Args])
    end;
call(Ast) ->
    case module(Ast) of
        {ok, M} -> parts(M, '_', '_', none);
        error -> throw({spec, ["expected Module.function, Module.function/arity or "
                               "Module.function(patterns), got ", code(Ast)]})
    end.

parts(M, F, A, Args) ->
    #{module => M, function => F, arity => A, args => Args, guards => none}.

%% {Module, Function} of Module.function (with or without arguments).
remote({{'.', _, [Mod, F]}, _, Args}, How) when How =:= args orelse Args =:= [] ->
    case {module(Mod), is_atom(F) orelse tracekit_ex:new_atom(F)} of
        {{ok, M}, true} -> {M, F};
        {{ok, M}, {true, Name}} -> {M, function_atom(M, Name)};
        {{ok, _}, false} -> throw({spec, ["expected Module.function/arity, got ", code(F)]});
        {error, _} -> throw({spec, ["the module must be an alias (MyApp.Server) or an atom "
                                    "(:lists), got ", code(Mod)]})
    end;
remote(Ast, _) ->
    throw({spec, ["expected Module.function/arity, got ", code(Ast)]}).

module({'__aliases__', _, [_ | _] = Parts}) ->
    case lists:all(fun(P) -> is_atom(P) orelse tracekit_ex:new_atom(P) =/= false end, Parts) of
        true ->
            Names = [case tracekit_ex:new_atom(P) of
                         {true, Name} -> unicode:characters_to_list(Name);
                         false -> atom_to_list(P)
                     end || P <- Parts],
            Full = case Names of
                       ["Elixir" | _] -> lists:join(".", Names);
                       _ -> lists:join(".", ["Elixir" | Names])
                   end,
            {ok, module_atom(lists:flatten(Full))};
        false ->
            error
    end;
module(M) when is_atom(M), M =/= nil, M =/= true, M =/= false ->
    {ok, M};
module(M) ->
    case tracekit_ex:new_atom(M) of
        {true, Name} -> {ok, module_atom(unicode:characters_to_list(Name))};
        false -> error
    end.

%% The atom of a module's name. A spec makes no atom (see
%% tracekit_ex:string_to_quoted/1) but the name of a module that can be
%% loaded (a file of the code path: as many as there are files).
module_atom(Name) ->
    try
        list_to_existing_atom(Name)
    catch
        error:badarg ->
            case code:where_is_file(Name ++ ".beam") of
                non_existing ->
                    Text = case Name of
                               "Elixir." ++ Alias -> Alias;
                               _ -> [$: | Name]
                           end,
                    throw({spec, io_lib:format("module ~ts is not available (nofile: it is "
                                               "neither loaded nor in the code path)", [Text])});
                _ ->
                    list_to_atom(Name)
            end
    end.

%% The atom of a function name that was not an atom when the spec was
%% read: the module loaded (as tracing it would), the name is an atom if
%% the module has such a function.
function_atom(M, Name) ->
    _ = code:ensure_loaded(M),
    try
        binary_to_existing_atom(Name, utf8)
    catch
        error:badarg ->
            throw({spec, io_lib:format("undefined function ~ts.~ts (module ~ts has no "
                                       "function ~ts)",
                                       [tracekit_ex:module(M), Name, tracekit_ex:module(M),
                                        Name])})
    end.

%% A name that is not an atom, as a literal: no term has it.
-spec new_atom_literal(binary()) -> no_return().
new_atom_literal(Name) ->
    throw({spec, io_lib:format("the atom :~ts does not exist in this node, so no call can "
                               "hold it (a spec makes no atoms): check its spelling, or load "
                               "the module that uses it first", [Name])}).

%% `a when b when c': a, b and c (one of them is enough).
whens({'when', _, [A, B]}) -> [A | whens(B)];
whens(G) -> [G].

%%% Patterns --------------------------------------------------------------

pattern(#{new_atom := Name}) ->
    new_atom_literal(Name);
pattern({'_', _, Ctx}) when is_atom(Ctx) ->
    {var, 0, '_'};
pattern({Name, _, Ctx} = V) when (is_atom(Name) orelse is_map(Name)), is_atom(Ctx) ->
    {var, 0, var_name(V)};
pattern(X) when is_atom(X); is_number(X); is_binary(X) ->
    erl_parse:abstract(X);
pattern(L) when is_list(L) ->
    list(L, fun pattern/1);
pattern({A, B}) ->
    {tuple, 0, [pattern(A), pattern(B)]};
pattern({'{}', _, Es}) when is_list(Es) ->
    {tuple, 0, [pattern(E) || E <- Es]};
pattern({'%{}', _, [{'|', _, _} | _]} = E) ->
    not_pattern(E, "a map update is not a pattern: write %{key: pattern}");
pattern({'%{}', _, KVs}) when is_list(KVs) ->
    {map, 0, [map_field(KV) || KV <- KVs]};
pattern({'%', _, [Name, {'%{}', _, KVs}]} = E) when is_list(KVs) ->
    Struct = case Name of
                 {'_', _, Ctx} when is_atom(Ctx) -> {var, 0, '_'};
                 {N, _, Ctx} when (is_atom(N) orelse is_map(N)), is_atom(Ctx) ->
                     {var, 0, var_name(Name)};
                 _ ->
                     case module(Name) of
                         {ok, M} -> {atom, 0, M};
                         error -> not_pattern(E, "the struct's name must be an alias, "
                                              "as in %MyApp.State{}")
                     end
             end,
    {map, 0, [{map_field_exact, 0, {atom, 0, '__struct__'}, Struct}
              | [map_field(KV) || KV <- KVs]]};
pattern({'__aliases__', _, _} = A) ->
    case module(A) of
        {ok, M} -> {atom, 0, M};
        error -> not_pattern(A, "an alias of literal names is expected")
    end;
pattern({'-', _, [N]}) when is_number(N) ->
    erl_parse:abstract(-N);
pattern({'+', _, [N]}) when is_number(N) ->
    erl_parse:abstract(N);
pattern({'<<>>', _, Segs} = E) ->
    case lists:all(fun(S) -> is_binary(S) orelse (is_integer(S) andalso S >= 0
                                                   andalso S =< 255) end, Segs) of
        true -> erl_parse:abstract(<< <<(seg(S))/binary>> || S <- Segs >>);
        false -> not_pattern(E, "a match spec matches whole binaries only: write the "
                             "binary itself, or _")
    end;
pattern({Sigil, _, [{'<<>>', _, [Text]}, []]} = E)
  when Sigil =:= sigil_c; Sigil =:= sigil_C; Sigil =:= sigil_s; Sigil =:= sigil_S ->
    case is_binary(Text) of
        true when Sigil =:= sigil_c; Sigil =:= sigil_C ->
            erl_parse:abstract(unicode:characters_to_list(Text));
        true ->
            erl_parse:abstract(Text);
        false ->
            not_pattern(E, "a sigil in a spec is a literal, without interpolation")
    end;
pattern({'^', _, [_]} = E) ->
    not_pattern(E, io_lib:format("~ts pins a variable, and a spec has no variable "
                                 "bound before it: write the value itself, as in "
                                 "MyApp.Server.handle_call({:get, 5}, _, _)", [code(E)]));
pattern({'=', _, [_, _]} = E) ->
    not_pattern(E, "pattern = pattern is not supported in a match spec: use one pattern");
pattern({'<>', _, [_, _]} = E) ->
    not_pattern(E, "\"prefix\" <> rest cannot be matched in a match spec: match the "
                "whole binary, or use _ and a guard");
pattern({'++', _, [_, _]} = E) ->
    not_pattern(E, "~c\"prefix\" ++ rest is not supported in a match spec: use a list "
                "pattern such as [?p, ?r | rest]");
pattern({'@', _, _} = E) ->
    not_pattern(E, "module attributes are not known in a spec: write the value itself");
pattern(E) ->
    not_pattern(E, "use literals, variables, _, tuples, lists, maps and structs").

seg(S) when is_binary(S) -> S;
seg(B) -> <<B>>.

map_field({K, V}) ->
    Key = case literal(K) of
              {ok, T} -> T;
              error -> not_pattern(K, "map keys in a pattern must be literals")
          end,
    case is_atom(Key) andalso (Key =:= '_' orelse lists:prefix("$", atom_to_list(Key))) of
        true -> not_pattern(K, "a map key cannot be :_ or an atom beginning with $ in a "
                            "match spec");
        false -> {map_field_exact, 0, erl_parse:abstract(Key), pattern(V)}
    end;
map_field(F) ->
    not_pattern(F, "expected key: pattern or key => pattern").

%% A literal term of the AST (atoms, numbers, strings, lists, tuples,
%% aliases), or error.
literal(X) when is_atom(X); is_number(X); is_binary(X) -> {ok, X};
literal(#{new_atom := Name}) -> new_atom_literal(Name);
literal({'__aliases__', _, _} = A) -> module(A);
literal({'-', _, [N]}) when is_number(N) -> {ok, -N};
literal({A, B}) ->
    case {literal(A), literal(B)} of
        {{ok, X}, {ok, Y}} -> {ok, {X, Y}};
        _ -> error
    end;
literal({'{}', _, Es}) when is_list(Es) ->
    case literals(Es) of
        {ok, L} -> {ok, list_to_tuple(L)};
        error -> error
    end;
literal(L) when is_list(L) ->
    literals(L);
literal(_) ->
    error.

literals(Es) ->
    try {ok, [begin {ok, T} = literal(E), T end || E <- Es]}
    catch error:{badmatch, _} -> error
    end.

%% A list of the AST ([a, b], [h | t]) as erl_parse's cons cells.
list([], _F) -> {nil, 0};
list([{'|', _, [H, T]}], F) -> {cons, 0, F(H), F(T)};
list([H | T], F) -> {cons, 0, F(H), list(T, F)}.

%% A variable's name: an atom, or the text of a name that is not an atom
%% (tracekit_spec only compares names and writes them).
var_name({Name, _, _} = V) ->
    Text = case tracekit_ex:new_atom(Name) of
               {true, T} -> unicode:characters_to_list(T);
               false -> atom_to_list(Name)
           end,
    case Text of
        "__" ++ _ -> throw({spec, [code(V), " is not known in a spec: write the value itself"]});
        _ when is_atom(Name) -> Name;
        _ -> unicode:characters_to_binary(Text)
    end.

-spec not_pattern(term(), iodata()) -> no_return().
not_pattern(E, Why) ->
    throw({spec, ["argument pattern ", code(E), " is not supported: ", Why]}).

%%% Guards ----------------------------------------------------------------

guard(#{new_atom := Name}) ->
    new_atom_literal(Name);
guard({'_', _, Ctx}) when is_atom(Ctx) ->
    throw({spec, "_ cannot be used in a guard"});
guard({Name, _, Ctx} = V) when (is_atom(Name) orelse is_map(Name)), is_atom(Ctx) ->
    {var, 0, var_name(V)};
guard(X) when is_atom(X); is_number(X); is_binary(X) ->
    erl_parse:abstract(X);
guard(L) when is_list(L) ->
    list(L, fun guard/1);
guard({A, B}) ->
    {tuple, 0, [guard(A), guard(B)]};
guard({'{}', _, Es}) when is_list(Es) ->
    {tuple, 0, [guard(E) || E <- Es]};
guard({'%{}', _, KVs} = E) when is_list(KVs) ->
    {map, 0, [case KV of
                  {K, V} -> {map_field_assoc, 0, guard(K), guard(V)};
                  _ -> not_guard(E)
              end || KV <- KVs]};
guard({'__aliases__', _, _} = A) ->
    case module(A) of
        {ok, M} -> {atom, 0, M};
        error -> not_guard(A)
    end;
guard({'not', _, [A]}) ->
    {op, 0, 'not', guard(A)};
guard({'-', _, [A]}) ->
    {op, 0, '-', guard(A)};
guard({'+', _, [A]}) ->
    {op, 0, '+', guard(A)};
guard({'in', _, [X, Range]} = E) ->
    in(guard(X), Range, E);
guard({{'.', _, [Map, Key]}, Meta, []} = E) when is_atom(Key), Key =/= '__aliases__' ->
    %% map.field
    case proplists:get_value(no_parens, Meta, false) andalso module(Map) =:= error of
        true -> {call, 0, {atom, 0, map_get}, [{atom, 0, Key}, guard(Map)]};
        false -> remote_guard(E)
    end;
guard({{'.', _, [_, #{new_atom := Name}]}, Meta, []}) ->
    %% map.field of a field that is not an atom, or Mod.fun() of no function
    case proplists:get_value(no_parens, Meta, false) of
        true -> new_atom_literal(Name);
        false -> throw({spec, io_lib:format("~ts is not a guard function", [Name])})
    end;
guard({{'.', _, [_, _]}, _, Args} = E) when is_list(Args) ->
    remote_guard(E);
guard({Op, _, [A, B]} = E) when is_atom(Op) ->
    case lists:keyfind(Op, 1, ?OPS) of
        {_, ErlOp} -> {op, 0, ErlOp, guard(A), guard(B)};
        false -> local_guard(Op, [A, B], E)
    end;
guard({F, _, Args} = E) when is_atom(F), is_list(Args) ->
    local_guard(F, Args, E);
guard({#{new_atom := _} = F, _, Args} = E) when is_list(Args) ->
    not_guard_fun(E, F, length(Args));
guard(E) ->
    not_guard(E).

local_guard(elem, [T, I], _) ->
    Index = case I of
                N when is_integer(N), N >= 0 -> {integer, 0, N + 1};
                _ -> {op, 0, '+', guard(I), {integer, 0, 1}}
            end,
    {call, 0, {atom, 0, element}, [Index, guard(T)]};
local_guard(is_map_key, [Map, Key], _) ->
    {call, 0, {atom, 0, is_map_key}, [guard(Key), guard(Map)]};
local_guard(is_nil, [X], _) ->
    {op, 0, '=:=', guard(X), {atom, 0, nil}};
local_guard(is_struct, [X], _) ->
    G = guard(X),
    all([{call, 0, {atom, 0, is_map}, [G]},
         {call, 0, {atom, 0, is_map_key}, [{atom, 0, '__struct__'}, G]},
         {call, 0, {atom, 0, is_atom}, [struct_name(G)]}]);
local_guard(is_struct, [X, Name], _) ->
    G = guard(X),
    all([{call, 0, {atom, 0, is_map}, [G]},
         {call, 0, {atom, 0, is_map_key}, [{atom, 0, '__struct__'}, G]},
         {op, 0, '=:=', struct_name(G), guard(Name)}]);
local_guard(Op, [A, B], _) when Op =:= 'div'; Op =:= 'rem' ->
    {op, 0, Op, guard(A), guard(B)};
local_guard(F, Args, E) ->
    case lists:member({F, length(Args)}, ?GUARD_FUNS) of
        true -> {call, 0, {atom, 0, F}, [guard(A) || A <- Args]};
        false -> not_guard_fun(E, F, length(Args))
    end.

struct_name(G) ->
    {call, 0, {atom, 0, map_get}, [{atom, 0, '__struct__'}, G]}.

all([G]) -> G;
all([G | Gs]) -> {op, 0, 'andalso', G, all(Gs)}.

%% :erlang.f(...) (checked by tracekit_spec) and Bitwise's functions.
remote_guard({{'.', _, [Mod, F]}, _, Args} = E) ->
    case {module(Mod), F, Args} of
        {{ok, erlang}, _, _} when is_atom(F) ->
            {call, 0, {remote, 0, {atom, 0, erlang}, {atom, 0, F}}, [guard(A) || A <- Args]};
        {{ok, 'Elixir.Bitwise'}, _, [A, B]} when F =:= 'band'; F =:= 'bor'; F =:= 'bxor';
                                                  F =:= 'bsl'; F =:= 'bsr' ->
            {op, 0, F, guard(A), guard(B)};
        {{ok, 'Elixir.Bitwise'}, 'bnot', [A]} ->
            {op, 0, 'bnot', guard(A)};
        {{ok, 'Elixir.Kernel'}, _, _} when is_atom(F) ->
            local_guard(F, Args, E);
        _ ->
            not_guard_fun(E, F, length(Args))
    end.

%% x in [a, b] and x in first..last.
in(X, L, E) when is_list(L) ->
    case literal(L) of
        {ok, []} -> {atom, 0, false};
        {ok, Vs} -> any([{op, 0, '=:=', X, erl_parse:abstract(V)} || V <- Vs]);
        error -> not_guard(E)
    end;
in(X, {'..', _, [A, B]} = R, _E) ->
    case {literal(A), literal(B)} of
        {{ok, First}, {ok, Last}} when is_integer(First), is_integer(Last) ->
            {Lo, Hi} = {min(First, Last), max(First, Last)},
            all([{call, 0, {atom, 0, is_integer}, [X]},
                 {op, 0, '>=', X, {integer, 0, Lo}}, {op, 0, '=<', X, {integer, 0, Hi}}]);
        _ ->
            throw({spec, ["the range ", code(R), " in a guard must have literal integer ends"]})
    end;
in(_X, _, E) ->
    throw({spec, [code(E), " is not supported in a guard: the right of in must be a "
                  "literal list or range"]}).

any([G]) -> G;
any([G | Gs]) -> {op, 0, 'orelse', G, any(Gs)}.

-spec not_guard(term()) -> no_return().
not_guard(E) ->
    throw({spec, [code(E), " is not supported in a guard"]}).

-spec not_guard_fun(term(), term(), non_neg_integer()) -> no_return().
not_guard_fun(E, F, N) ->
    throw({spec, io_lib:format("~ts cannot be used in a guard (~ts/~w is not a guard "
                               "function; use is_integer/1, elem/2, map_size/1, "
                               "is_map_key/2, is_nil/1, ...)",
                               [code(E), fun_name(F), N])}).

fun_name(F) when is_atom(F) -> tracekit_ex:function(F);
fun_name(#{new_atom := Name}) -> Name;
fun_name(F) -> code(F).

%% The code of an AST, as Elixir writes it (shortened).
code(Ast) ->
    Text = try tracekit_ex:to_string(Ast)
           catch _:_ -> io_lib:format("~0tP", [Ast, 10])
           end,
    string:slice(unicode:characters_to_list(Text), 0, 200).

%%% Captures and errors ---------------------------------------------------

%% @doc A capture of a named function (`&MyApp.Server.handle_call/3',
%% `fun lists:seq/2'): every call of that function (the parts that
%% tracekit_spec compiles).
-spec parse_fun(function()) -> {ok, map()} | {error, iodata()}.
parse_fun(Fun) ->
    case erlang:fun_info(Fun, type) of
        {type, external} ->
            {module, M} = erlang:fun_info(Fun, module),
            {name, F} = erlang:fun_info(Fun, name),
            {arity, A} = erlang:fun_info(Fun, arity),
            Syntax = case tracekit_ex:loaded() of true -> elixir; false -> erlang end,
            {ok, #{module => M, function => F, arity => A, args => none,
                   guards => none, syntax => Syntax,
                   actions => #{return => false, exception => false, stack => none},
                   text => fun_text(Fun)}};
        {type, local} ->
            {error, "an anonymous function cannot be traced: give a capture of a named "
             "function, as &MyApp.Server.handle_call/3 (in Erlang, fun m:f/2)"}
    end.

%% @doc The text of a capture: Elixir's when Elixir is loaded, else Erlang's.
-spec fun_text(function()) -> string().
fun_text(Fun) ->
    {module, M} = erlang:fun_info(Fun, module),
    {name, F} = erlang:fun_info(Fun, name),
    {arity, A} = erlang:fun_info(Fun, arity),
    case tracekit_ex:loaded() of
        true -> unicode:characters_to_list(["&", tracekit_ex:mfa(M, F, A)]);
        false -> lists:flatten(io_lib:format("fun ~tw:~tw/~w", [M, F, A]))
    end.

%% @doc Why a module of an Elixir spec cannot be traced, in Elixir's terms.
-spec not_loaded(module(), term()) -> iodata().
not_loaded(M, Why) ->
    io_lib:format("module ~ts is not available (~0tP); ~ts",
                  [tracekit_ex:module(M), Why, 10, ?EXAMPLE]).

%% @doc Why no function of module M matches F/A, in Elixir's terms. Fs:
%% the functions of the module.
-spec no_match(module(), atom(), arity() | '_', [{atom(), arity()}]) -> iodata().
no_match(M, F, A, Fs) ->
    Arities = lists:usort([A1 || {F1, A1} <- Fs, F1 =:= F]),
    Why = case Arities of
              _ when F =:= '_' ->
                  io_lib:format("module ~ts has no function of arity ~w",
                                [tracekit_ex:module(M), A]);
              [] ->
                  io_lib:format("undefined function ~ts (module ~ts has no function ~ts)",
                                [tracekit_ex:mf(M, F), tracekit_ex:module(M),
                                 tracekit_ex:function(F)]);
              _ ->
                  io_lib:format("undefined function ~ts (the module has ~ts)",
                                [tracekit_ex:mfa(M, F, A),
                                 lists:join(", ", [[tracekit_ex:function(F), "/",
                                                    integer_to_list(X)] || X <- Arities])])
          end,
    Same = [FA || {F1, _} = FA <- Fs, F1 =:= F],
    %% The exported function whose name begins most like F's first, of
    %% those the nearest in length (mapp: map/2).
    Exported = [FA || {_, FA} <- lists:sort([{like(F, F1), FA}
                                             || {F1, _} = FA <- M:module_info(exports),
                                                F1 =/= module_info, F1 =/= '__info__'])],
    case Same ++ Exported of
        [{EF, EA} | _] ->
            io_lib:format("~ts; for example \"~ts\"",
                          [Why, tracekit_ex:mfa(M, EF, EA)]);
        [] ->
            [Why, "; ", ?EXAMPLE]
    end.

%% How unlike name B is to A (smaller is nearer): minus the length of
%% their common beginning, then the difference of their lengths.
like(A, B) when is_atom(A), is_atom(B) ->
    {TA, TB} = {atom_to_binary(A), atom_to_binary(B)},
    {-binary:longest_common_prefix([TA, TB]), abs(byte_size(TA) - byte_size(TB))};
like(_, _) ->
    {0, 0}.
