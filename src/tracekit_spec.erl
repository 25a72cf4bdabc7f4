%% @doc Call specs: from the strings people type at the shell to match
%% specs the VM understands.
%%
%% A spec string is close to Erlang syntax:
%% ```
%% "lists:seq/2"                           every call of lists:seq/2
%% "lists:seq"                             lists:seq of any arity
%% "lists" or "mymod:_"                    every function of the module
%% "mymod:_/3"                             every function of arity 3
%% "mymod:handle_call({get, _}, _, _)"     calls whose arguments match
%% "lists:seq(From, To) when To > From + 100"    with a guard
%% "mymod:f/1 -> return"                   also show the return value
%% "mymod:f/1 -> exception"                also show exceptions
%% "mymod:f/1 -> return, exception"        both
%% "mymod:f/1 -> caller"                   also show the calling function
%% "mymod:f/1 -> stack"                    also show the chain of callers
%% "mymod:f/1 -> return, stack"            actions combine
%% "m:handle_call(#{op := get}, _, _)"     maps in patterns
%% "m:f(M) when map_get(k, M) > 1"         and in guards
%% '''
%% Argument patterns may use literals, variables, `_', tuples, lists and
%% maps (`#{key := Pattern}', keys literal); a variable that occurs twice
%% must be bound to the same value. Guards use the guard BIFs of match
%% specs (`is_integer/1', `element/2', `map_get/2', `is_map_key/2',
%% `map_size/1', comparisons, arithmetic, `andalso', ...) and may build
%% tuples, lists and maps (`M =:= #{k => V}'); `,' and `;' work as in a
%% function clause.
%%
%% `caller' and `stack' add the `{message, ...}' action of a match spec:
%% the call event then carries `{caller, {M, F, A}}' (the function the
%% call returns to) or `{stack, Frames}' (the process's stack, as
%% `erlang:process_info(P, current_stacktrace)' gives it, at most
%% `stack_depth' frames plus one to tell that there were more, see
%% {@link parse/2}). A call that is a tail call returns to its caller's
%% caller, which is then the one shown. With both, the stack is shown.
%%
%% Terms are accepted too: `{M, F, A}' (where `F' and `A' may be `_') and
%% `{M, F, A, MatchSpec}' with a match spec written by hand, or a list of
%% any of these.
%%
%% Specs in Elixir syntax (`"Enum.map/2"', `"MyApp.Server.handle_call(%{op:
%% :get}, _, _) -> return"') and captures (`&MyApp.Server.handle_call/3',
%% `fun m:f/1') are read by {@link tracekit_spec_ex}, which says how the
%% syntax of a string is decided, into the same match specs; their call
%% specs have `syntax => elixir', and their errors are in Elixir's terms.
%%
%% {@link parse/1} only reads the spec; {@link resolve/1} also loads the
%% modules and checks that some function matches. Both return
%% `{error, {bad_spec, Spec, Why}}' on a mistake, where `Why' is a sentence
%% saying what is wrong followed by an example of the right form.
-module(tracekit_spec).

-export([parse/1, parse/2, resolve/1, resolve/2, shows_return/2, format/1]).

-export_type([spec/0, call/0, mfa_pattern/0, opts/0]).

-type spec() :: string() | binary() | mfa_pattern() | function()
              | {module(), atom(), arity() | '_', [tuple()]}
              | [string() | binary() | mfa_pattern() | tuple() | function()].
-type mfa_pattern() :: {module(), atom(), arity() | '_'}.
%% One parsed call spec. `return' and `exception' say what to show after
%% the call, `stack' what the call event carries about its callers;
%% `match_spec' already carries the matching trace actions.
-type call() :: #{module := module(),
                  function := atom(),
                  arity := arity() | '_',
                  match_spec := [tuple()],
                  return := boolean(),
                  exception := boolean(),
                  stack => none | caller | stack,
                  syntax => erlang | elixir,
                  text := string()}.
%% `stack_depth': how many frames `-> stack' shows (default 8, at most
%% 64).
-type opts() :: #{stack_depth => 1..64}.

-define(STACK_DEPTH, 8).
-define(NO_ACTIONS, #{return => false, exception => false, stack => none}).
-define(GUARD_NEEDS_ARGS, "a guard needs argument patterns to refer to: write "
        "Module:Function(Arg1, Arg2) when ...").

-define(EXAMPLE, "for example \"lists:seq/2\", "
        "\"my_mod:handle_call({get, _}, _, _) -> return\" or "
        "\"lists:seq(From, To) when To > From\"").

-define(GUARD_BIFS,
        [{abs,1}, {bit_size,1}, {byte_size,1}, {element,2}, {float,1},
         {hd,1}, {is_atom,1}, {is_binary,1}, {is_bitstring,1},
         {is_boolean,1}, {is_float,1}, {is_function,1}, {is_function,2},
         {is_integer,1}, {is_list,1}, {is_map,1}, {is_map_key,2},
         {is_number,1}, {is_pid,1}, {is_port,1}, {is_record,3}, {is_reference,1}, {is_tuple,1}, {length,1},
         {map_get,2}, {map_size,1}, {max,2}, {min,2}, {node,0}, {node,1},
         {round,1}, {self,0}, {size,1}, {tl,1}, {trunc,1}, {tuple_size,1},
         {binary_part,2}, {binary_part,3}, {ceil,1}, {floor,1}]).

%% Match spec actions that change trace flags, with their arities, and
%% the flags they take.
-define(FLAG_ACTIONS, [{trace, 2}, {trace, 3}, {enable_trace, 1}, {enable_trace, 2},
                       {disable_trace, 1}, {disable_trace, 2}]).
-define(TRACE_FLAGS,
        [all, send, 'receive', procs, ports, call, arity, return_to, silent,
         running, exiting, running_procs, running_ports, garbage_collection,
         timestamp, monotonic_timestamp, strict_monotonic_timestamp,
         scheduler_id, set_on_spawn, set_on_first_spawn, set_on_link,
         set_on_first_link]).

-define(GUARD_OPS,
        ['==', '/=', '=:=', '=/=', '<', '>', '=<', '>=', '+', '-', '*', '/',
         'div', 'rem', 'band', 'bor', 'bxor', 'bsl', 'bsr', 'and', 'or',
         'xor', 'andalso', 'orelse']).

%% @equiv parse(Spec, #{})
-spec parse(spec()) -> {ok, [call()]} | {error, {bad_spec, term(), string() | binary()}}.
parse(Spec) ->
    parse(Spec, #{}).

%% @doc Reads a spec without loading anything. Returns the call specs it
%% stands for, in order. `Opts': `stack_depth', the frames `-> stack'
%% shows (default 8); a bad option raises `badarg'.
-spec parse(spec(), opts()) -> {ok, [call()]} | {error, {bad_spec, term(), string() | binary()}}.
parse(Spec, Opts) ->
    case Opts of
        #{stack_depth := D} when not is_integer(D); D < 1; D > 64 ->
            erlang:error(badarg, [Spec, Opts]);
        #{} ->
            parse_spec(Spec, maps:get(stack_depth, Opts, ?STACK_DEPTH));
        _ ->
            erlang:error(badarg, [Spec, Opts])
    end.

%% D: the stack depth.
parse_spec([], _D) ->
    bad([], "the spec is empty");
parse_spec(Spec, D) when is_binary(Spec) ->
    case unicode:characters_to_list(Spec) of
        [] -> bad(Spec, "the spec is empty");
        S when is_list(S) -> parse_text(Spec, S, D);
        {error, _, Rest} ->
            bad(Spec, io_lib:format("the binary is not UTF-8 text: byte ~w is not "
                                    "part of a UTF-8 character",
                                    [byte_size(Spec) - byte_size(Rest) + 1]));
        {incomplete, _, _} ->
            bad(Spec, "the binary is not UTF-8 text: it ends inside a character")
    end;
parse_spec(Spec, D) when is_list(Spec) ->
    case text(Spec) of
        true -> parse_text(Spec, Spec, D);
        {false, C} -> bad(Spec, io_lib:format("the string has ~w in it, which is not "
                                              "a character", [C]));
        false -> parse_list(Spec, [], D)
    end;
parse_spec(Spec, _D) when is_tuple(Spec) ->
    wrap(Spec, parse_term(Spec));
parse_spec(Spec, D) when is_function(Spec) ->
    wrap(Spec, maybe
                   {ok, Parts} ?= tracekit_spec_ex:parse_fun(Spec),
                   compile(Parts, D)
               end, elixir);
parse_spec(Spec, _D) ->
    bad(Spec, "expected a string, {Module, Function, Arity}, "
        "{Module, Function, Arity, MatchSpec}, a capture (fun m:f/1, &M.f/1) "
        "or a list of them").

%% A string in Erlang or Elixir syntax (tracekit_spec_ex:syntax/1 tells).
parse_text(Spec, S, D) ->
    case tracekit_spec_ex:syntax(S) of
        elixir -> wrap(Spec, elixir(S, D), elixir);
        erlang -> wrap(Spec, parse_string(S, D))
    end.

%% An Elixir spec: its call read by tracekit_spec_ex (which calls nothing
%% here: one module reads Elixir, this one compiles both).
elixir(S, D) ->
    maybe
        {ok, Parts, ActionText} ?= tracekit_spec_ex:parse_string(S),
        {ok, Actions} ?= parse_actions_text(ActionText),
        compile(Parts#{actions => Actions}, D)
    end.

%% Whether L is a string: true, {false, NotAChar} for a list of integers
%% one of which is not a character, or false for a list of something else.
text(L) ->
    try lists:all(fun is_integer/1, L) of
        false -> false;
        true ->
            case lists:dropwhile(fun is_char/1, L) of
                [] -> true;
                [C | _] -> {false, C}
            end
    catch
        error:_ -> false                        % an improper list
    end.

is_char(C) ->
    C >= 0 andalso C =< 16#10FFFF andalso not (C >= 16#D800 andalso C =< 16#DFFF).

parse_list([], Acc, _D) ->
    {ok, lists:append(lists:reverse(Acc))};
parse_list([S | T], Acc, D) when is_list(S); is_binary(S); is_tuple(S); is_function(S) ->
    case parse_spec(S, D) of
        {ok, Calls} -> parse_list(T, [Calls | Acc], D);
        {error, _} = E -> E
    end;
parse_list([S | _], _, _) ->
    bad(S, "expected a string, {Module, Function, Arity} or "
        "{Module, Function, Arity, MatchSpec} in the list");
parse_list(Improper, _, _) ->
    bad(Improper, "expected a proper list of specs").

wrap(Spec, Result) -> wrap(Spec, Result, erlang).

wrap(Spec, {error, Why}, Syntax) -> bad(Spec, Why, Syntax);
wrap(_Spec, {ok, Call}, _Syntax) -> {ok, [Call]}.

bad(Spec, Why) ->
    bad(Spec, Why, erlang).

bad(Spec, Why, erlang) ->
    {error, {bad_spec, Spec, lists:flatten([Why, "; ", ?EXAMPLE])}};
bad(Spec, Why, elixir) ->
    {error, {bad_spec, Spec, unicode:characters_to_binary([Why, "; ", tracekit_spec_ex:example()])}}.

%%% Terms ---------------------------------------------------------------------

parse_term({M, F, A}) ->
    parse_term({M, F, A, [{'_', [], []}]});
parse_term({M, F, A, MS} = T) ->
    case check_mfa(M, F, A) of
        ok when is_list(MS) ->
            case check_ms(MS) of
                ok ->
                    {ok, #{module => M, function => F, arity => A,
                           match_spec => MS,
                           return => ms_has(MS, [return_trace, exception_trace]),
                           exception => ms_has(MS, [exception_trace]),
                           stack => none, text => show(T)}};
                {error, Why} ->
                    {error, ["the match spec is not valid: ", Why]}
            end;
        ok ->
            {error, io_lib:format("the match spec must be a list, got ~ts", [show(MS)])};
        {error, _} = E ->
            E
    end;
parse_term(T) ->
    {error, io_lib:format("~ts is not {Module, Function, Arity} or "
                          "{Module, Function, Arity, MatchSpec}", [show(T)])}.

check_mfa('_', _, _) ->
    {error, "the module cannot be _: name the module to trace"};
check_mfa(M, _, _) when not is_atom(M) ->
    {error, io_lib:format("the module must be an atom, got ~ts", [show(M)])};
check_mfa(_, F, _) when not is_atom(F) ->
    {error, io_lib:format("the function must be an atom or _, got ~ts", [show(F)])};
check_mfa(_, _, A) when A =:= '_'; is_integer(A), A >= 0, A =< 255 ->
    ok;
check_mfa(_, _, A) ->
    {error, io_lib:format("the arity must be an integer from 0 to 255 or _, "
                          "got ~ts", [show(A)])}.

%% A term of the user's on one line, shortened (it may be huge or deep).
show(T) ->
    lists:flatten(io_lib:format("~0tP", [T, 30], [{chars_limit, 200}])).

ms_has(MS, Actions) ->
    lists:any(fun({_, _, Body}) when is_list(Body) ->
                      lists:any(fun(B) -> lists:member(B, [{A} || A <- Actions]) end, Body);
                 (_) -> false
              end, MS).

%%% Strings -------------------------------------------------------------------

parse_string(S, D) ->
    case capital_module(S) of
        {yes, Name} ->
            Quoted = case lists:prefix("Elixir.", Name) of
                         true -> Name;
                         false -> "Elixir." ++ Name
                     end,
            {error, io_lib:format("~ts is not an atom in Erlang: quote a module whose "
                                  "name begins with a capital, '~ts':~ts, or write the "
                                  "spec in Elixir syntax, ~ts.~ts",
                                  [Name, Quoted, after_colon(S), lists:nthtail(7, Quoted),
                                   after_colon(S)])};
        no ->
            parse_erlang(S, D)
    end.

%% An Erlang spec that begins with a capitalised name and a colon
%% (Elixir.Enum:map/2): {yes, Name}.
capital_module(S) ->
    case string:trim(S, leading) of
        [C | _] = T when C >= $A, C =< $Z ->
            {Name, Rest} = lists:splitwith(fun(X) -> X =:= $. orelse X =:= $_ orelse
                                                         (X >= $a andalso X =< $z) orelse
                                                         (X >= $A andalso X =< $Z) orelse
                                                         (X >= $0 andalso X =< $9)
                                           end, T),
            case string:trim(Rest, leading) of
                [$: | _] -> {yes, Name};
                _ -> no
            end;
        _ ->
            no
    end.

after_colon(S) ->
    [_, After] = string:split(S, ":"),
    string:trim(After).

parse_erlang(S, D) ->
    case erl_scan:string(S, {1, 1}) of
        {ok, [], _} ->
            {error, "the spec is empty"};
        {ok, [{dot, _}], _} ->
            {error, "the spec is empty"};
        {ok, Tokens0, End} ->
            %% A full stop at the end (as a shell command has) is left out.
            Tokens = case lists:last(Tokens0) of
                         {dot, _} -> lists:droplast(Tokens0);
                         _ -> Tokens0
                     end,
            parse_tokens(S, Tokens, End, D);
        {error, {{_, Col}, Mod, Err}, _} ->
            {error, io_lib:format("cannot read the spec at column ~w: ~ts",
                                  [Col, Mod:format_error(Err)])}
    end.

%% End is the location after the last character: the tokens added to
%% make a form of the spec get it, so that an error there reads as an
%% incomplete spec.
parse_tokens(S, Tokens, End, D) ->
    {HeadToks, ActionToks} = split_at(Tokens, '->'),
    {CallToks, GuardToks} = split_at(HeadToks, 'when'),
    maybe
        {ok, {M, F, A, Args}} ?= parse_call(CallToks, End),
        {ok, Actions} ?= parse_actions(ActionToks),
        ok ?= case {Args, GuardToks} of
                  {none, {_When, _}} -> {error, ?GUARD_NEEDS_ARGS};
                  _ -> ok
              end,
        {ok, GuardSeq} ?= parse_guards(GuardToks, End),
        compile(#{module => M, function => F, arity => A, args => Args,
                  guards => GuardSeq, actions => Actions, text => S}, D)
    end.

%% @private A call spec from its parts, as the Erlang and the Elixir
%% ({@link tracekit_spec_ex}) readers make them: `args' the argument
%% patterns (erl_parse's abstract format) or `none', `guards' a guard
%% sequence (lists of abstract guard expressions) or `none', `actions'
%% what parse_actions/1 gives. `syntax' (optional) is kept in the call.
%% D: the stack depth.
-spec compile(map(), 1..64) -> {ok, call()} | {error, iodata()}.
compile(#{module := M, function := F, arity := A, args := Args, guards := GuardSeq,
          actions := #{return := Return, exception := Exception, stack := Stack} = Actions,
          text := Text} = Parts, D) ->
    maybe
        {ok, MS} ?= match_spec(Args, GuardSeq, body(Actions, D)),
        {ok, maps:merge(maps:with([syntax], Parts),
                        #{module => M, function => F, arity => A, match_spec => MS,
                          return => Return, exception => Exception, stack => Stack,
                          text => Text})}
    end.

%% The actions of the match spec's body. One {message, _} action is
%% kept by the VM: with both caller and stack, the stack (whose first
%% frame is the caller). One frame more than the depth is asked for, to
%% tell that the stack went on.
body(#{return := Return, exception := Exception, stack := Stack}, D) ->
    Message = case Stack of
                  none -> [];
                  caller -> [{message, {{caller, {caller}}}}];
                  stack -> [{message, {{stack, {current_stacktrace, D + 1}}}}]
              end,
    Message ++ if Exception -> [{exception_trace}];
                  Return -> [{return_trace}];
                  true -> []
               end.

%% Splits the tokens at the first Sep outside brackets (and fun ... end,
%% case ... end and the like): {Before, After} where After is none when
%% Sep does not occur.
split_at(Tokens, Sep) ->
    split_at(Tokens, Sep, 0, []).

split_at([], _Sep, _Depth, Acc) ->
    {lists:reverse(Acc), none};
split_at([{Sep, _} = T | Rest], Sep, 0, Acc) ->
    {lists:reverse(Acc), {T, Rest}};
split_at([{'fun', _} = T, {'(', _} | _] = Toks, Sep, Depth, Acc) ->
    split_at(tl(Toks), Sep, Depth + 1, [T | Acc]);  % not fun M:F/A
split_at([T | Rest], Sep, Depth, Acc) ->
    D = case bracket(element(1, T)) of
            open -> Depth + 1;
            close -> Depth - 1;
            none -> Depth
        end,
    split_at(Rest, Sep, D, [T | Acc]).

bracket(K) when K =:= '('; K =:= '{'; K =:= '['; K =:= '<<'; K =:= 'begin';
                K =:= 'case'; K =:= 'if'; K =:= 'receive'; K =:= 'try'; K =:= 'maybe' ->
    open;
bracket(K) when K =:= ')'; K =:= '}'; K =:= ']'; K =:= '>>'; K =:= 'end' ->
    close;
bracket(_) ->
    none.

parse_call([], _End) ->
    {error, "there is no function before the guard or the ->"};
parse_call(Toks, End) ->
    case erl_parse:parse_exprs(Toks ++ [{dot, End}]) of
        {ok, [Expr]} ->
            call_form(Expr);
        {ok, _} ->
            {error, "expected one function, got several separated by commas "
             "(give a list of specs instead)"};
        {error, {End, _, _}} ->
            {error, "the spec ends too early (a bracket not closed?)"};
        {error, {Loc, Mod, Err}} ->
            {error, io_lib:format("syntax error at column ~w: ~ts",
                                  [column(Loc), Mod:format_error(Err)])}
    end.

column({_, C}) -> C;
column(L) -> L.

call_form({remote, _, M, F}) ->
    mfa(M, F, '_', none);
call_form({op, _, '/', {remote, _, M, F}, A}) ->
    case A of
        {integer, _, N} when N >= 0, N =< 255 -> mfa(M, F, N, none);
        {var, _, '_'} -> mfa(M, F, '_', none);
        _ -> {error, io_lib:format("the arity must be an integer from 0 to "
                                   "255 or _, got ~ts", [pp(A)])}
    end;
call_form({call, _, {remote, _, M, F}, Args}) ->
    mfa(M, F, length(Args), Args);
call_form({atom, _, M}) ->
    mfa({atom, 0, M}, {var, 0, '_'}, '_', none);
call_form(Expr) ->
    {error, io_lib:format("expected Module:Function, Module:Function/Arity or "
                          "Module:Function(ArgPatterns), got ~ts", [pp(Expr)])}.

mfa({var, _, '_'}, _, _, _) ->
    {error, "the module cannot be _: name the module to trace"};
mfa({atom, _, M}, F0, A, Args) ->
    case F0 of
        {atom, _, F} -> {ok, {M, F, A, Args}};
        {var, _, '_'} -> {ok, {M, '_', A, Args}};
        _ -> {error, io_lib:format("the function must be an atom or _, got ~ts",
                                   [pp(F0)])}
    end;
mfa(M, _, _, _) ->
    {error, io_lib:format("the module must be an atom, got ~ts", [pp(M)])}.


%% @private The actions of a spec from their text (after the ->), or
%% none.
-spec parse_actions_text(none | string()) -> {ok, map()} | {error, iodata()}.
parse_actions_text(none) ->
    {ok, ?NO_ACTIONS};
parse_actions_text(Text) ->
    case erl_scan:string(Text) of
        {ok, Toks, _} -> parse_actions({'->', Toks});
        {error, _, _} -> {error, io_lib:format("unknown actions after ->: ~ts: use return, "
                                               "exception, caller or stack", [Text])}
    end.

parse_actions(none) ->
    {ok, ?NO_ACTIONS};
parse_actions({_Arrow, []}) ->
    {error, "nothing after ->: write -> return, -> exception, -> caller, "
     "-> stack or several, as in -> return, stack"};
parse_actions({_Arrow, Toks}) ->
    actions(Toks, ?NO_ACTIONS).

actions([{atom, _, return} | T], Acc) -> actions_sep(T, Acc#{return := true});
actions([{atom, _, exception} | T], Acc) -> actions_sep(T, Acc#{exception := true});
actions([{atom, _, caller} | T], #{stack := S} = Acc) ->
    actions_sep(T, Acc#{stack := case S of stack -> stack; _ -> caller end});
actions([{atom, _, stack} | T], Acc) -> actions_sep(T, Acc#{stack := stack});
actions([Tok | _], _) ->
    {error, io_lib:format("unknown action ~ts after ->: use return, exception, "
                          "caller or stack, or several (-> return, stack)",
                          [token_text(Tok)])};
actions([], _) ->
    {error, "an action is missing after the comma: use return, exception, "
     "caller or stack"}.

actions_sep([], Acc) -> {ok, Acc};
actions_sep([{',', _} | T], Acc) -> actions(T, Acc);
actions_sep([Tok | _], _) ->
    {error, io_lib:format("unexpected ~ts after the action: separate actions "
                          "with a comma (-> return, stack)",
                          [token_text(Tok)])}.

token_text(Tok) ->
    case erl_scan:text(Tok) of
        undefined ->
            case Tok of
                {_, _, V} -> io_lib:format("~tw", [V]);
                {Cat, _} -> atom_to_list(Cat)
            end;
        Text -> Text
    end.

pp(Expr) ->
    try erl_pp:expr(Expr)
    catch _:_ -> io_lib:format("~tw", [Expr])
    end.

%%% Match specs ---------------------------------------------------------------

match_spec(Args, GuardSeq, Body) ->
    case {Args, GuardSeq} of
        {none, none} ->
            {ok, [{'_', [], Body}]};
        {none, _} ->
            {error, ?GUARD_NEEDS_ARGS};
        {_, _} ->
            maybe
                {ok, Head, Vars} ?= head(Args),
                {ok, Guards} ?= guards(GuardSeq, Vars),
                MS = [{Head, G, Body} || G <- Guards],
                case check_ms(MS) of
                    ok -> {ok, MS};
                    {error, Why} -> {error, ["the spec does not make a valid match spec: ", Why]}
                end
            end
    end.


%% Whether MS is a valid match spec for call tracing, by
%% erlang:match_spec_test/3. That function also runs the actions of the
%% spec, and in OTP 27 and 29 the VM crashes when one of them changes
%% trace flags (trace/2,3, enable_trace/1,2, disable_trace/1,2) outside a
%% trace. So these actions are checked here, and the spec given to
%% match_spec_test/3 has each of them replaced by a tuple of its
%% arguments (so that the arguments are still checked as expressions).
check_ms(MS) ->
    try erlang:match_spec_test([], testable(MS), trace) of
        {ok, _, _, _} -> ok;
        {error, Errs} -> {error, lists:join("; ", [E || {_, E} <- Errs])}
    catch
        throw:{flag_action, Action, Why} ->
            {error, io_lib:format("in ~ts: ~ts", [show(Action), Why])}
    end.

%% Only the bodies run actions (match_spec_test/3 refuses them in guards).
testable([{Head, Guards, Body} | T]) ->
    [{Head, Guards, expr(Body)} | testable(T)];
testable([C | T]) ->
    [C | testable(T)];
testable(Other) ->
    Other.

%% A match spec expression with its flag actions checked and replaced.
%% {const, T} is a literal; {{...}} builds a tuple of expressions; any
%% other tuple {F, Arg...} calls F; lists and maps are built of
%% expressions.
expr({const, _} = C) ->
    C;
expr({T}) when is_tuple(T) ->
    {list_to_tuple(expr(tuple_to_list(T)))};
expr(T) when is_tuple(T), tuple_size(T) > 0 ->
    [F | Args] = tuple_to_list(T),
    case lists:member({F, length(Args)}, ?FLAG_ACTIONS) of
        true ->
            flag_action(T, Args),
            {list_to_tuple(expr(Args))};
        false ->
            list_to_tuple([F | expr(Args)])
    end;
expr([H | T]) ->
    [expr(H) | expr(T)];
expr(M) when is_map(M) ->
    maps:from_list([{expr(K), expr(V)} || K := V <- M]);
expr(X) ->
    X.

%% Checks the arguments of an action that changes trace flags. The VM
%% would ignore a bad flag silently, so only flags written out are
%% accepted; the tracer flag is refused, as it would send the events
%% past tracekit's ring and its limits.
flag_action(Action, [Flags1, Flags2]) when element(1, Action) =:= trace ->
    flags(Action, Flags1),
    flags(Action, Flags2);
flag_action(Action, [Proc, Flags1, Flags2]) ->
    tracee(Action, Proc),
    flags(Action, Flags1),
    flags(Action, Flags2);
flag_action(Action, [Flag]) ->
    flag(Action, Flag);
flag_action(Action, [Proc, Flag]) ->
    tracee(Action, Proc),
    flag(Action, Flag).

flags(Action, {const, L}) ->
    flags(Action, L);
flags(Action, L) ->
    try lists:foreach(fun(F) -> flag(Action, F) end, L)
    catch
        error:_ ->
            throw({flag_action, Action, "the flags must be a list of trace flags "
                   "written out, for example [send, 'receive']"})
    end.

flag(Action, F) ->
    case lists:member(F, ?TRACE_FLAGS) of
        true -> ok;
        false -> throw({flag_action, Action, flag_problem(F)})
    end.

flag_problem(cpu_timestamp) ->
    "cpu_timestamp cannot be set by a match spec";
flag_problem(F) when is_tuple(F) ->
    io_lib:format("~ts: tracekit does not change the tracer (the events would "
                  "bypass its ring and its limits); the flags are atoms: ~ts",
                  [show(F), flag_names()]);
flag_problem(F) ->
    io_lib:format("~ts is not a trace flag; the flags are: ~ts", [show(F), flag_names()]).

flag_names() ->
    lists:join(", ", [io_lib:format("~tw", [F]) || F <- ?TRACE_FLAGS]).

tracee(_Action, P) when is_pid(P); is_atom(P); is_tuple(P) ->
    ok;
tracee(Action, P) ->
    throw({flag_action, Action,
           io_lib:format("the process ~ts must be a pid, a registered name, a "
                         "match variable such as '$1', or {self}", [show(P)])}).

%% The head: a list of patterns. Vars maps variable names to '$N'.
head(Args) ->
    try
        {Pats, Vars} = lists:mapfoldl(fun pattern/2, #{}, Args),
        {ok, Pats, Vars}
    catch
        throw:{pattern, Why} -> {error, Why}
    end.

pattern({var, _, '_'}, Vars) ->
    {'_', Vars};
pattern({var, _, V}, Vars) ->
    case Vars of
        #{V := Ms} -> {Ms, Vars};
        _ ->
            Ms = list_to_atom("$" ++ integer_to_list(map_size(Vars) + 1)),
            {Ms, Vars#{V => Ms}}
    end;
pattern({tuple, _, Es}, Vars) ->
    {Ps, Vars1} = lists:mapfoldl(fun pattern/2, Vars, Es),
    {list_to_tuple(Ps), Vars1};
pattern({cons, _, H, T}, Vars) ->
    {HP, Vars1} = pattern(H, Vars),
    {TP, Vars2} = pattern(T, Vars1),
    {[HP | TP], Vars2};
pattern({map, _, Fields}, Vars) ->
    {KVs, Vars1} = lists:mapfoldl(fun map_field/2, Vars, Fields),
    {maps:from_list(KVs), Vars1};
pattern({atom, _, A} = E, Vars) ->
    case atom_to_list(A) of
        [$$ | _] -> not_pattern(E, "atoms beginning with $ cannot be matched in a match spec");
        "_" -> not_pattern(E, "the atom '_' cannot be matched in a match spec");
        _ -> {A, Vars}
    end;
pattern({match, _, _, _} = E, _) ->
    not_pattern(E, "Var = Pattern is not supported in a match spec: "
                "use the pattern alone");
pattern({op, _, '++', _, _} = E, _) ->
    not_pattern(E, "\"prefix\" ++ Rest is not supported in a match spec: "
                "use a list pattern such as [$p, $r | Rest]");
pattern({record, _, Name, _} = E, _) ->
    not_pattern(E, io_lib:format("records are not known here: write the "
                                 "tuple, {~tw, ...}", [Name]));
pattern(E, Vars) ->
    try erl_parse:normalise(E) of
        T -> {T, Vars}
    catch
        _:_ -> not_pattern(E, "use literals, variables, _, tuples, lists "
                           "and maps with :=")
    end.

map_field({map_field_exact, _, K, V}, Vars) ->
    Key = try erl_parse:normalise(K)
          catch _:_ -> not_pattern(K, "map keys must be literals")
          end,
    case is_atom(Key) andalso lists:prefix("$", atom_to_list(Key)) orelse Key =:= '_' of
        true -> not_pattern(K, "a map key cannot be '_' or an atom beginning with $ "
                            "in a match spec");
        false -> ok
    end,
    {VP, Vars1} = pattern(V, Vars),
    {{Key, VP}, Vars1};
map_field({map_field_assoc, _, _, _} = F, _) ->
    throw({pattern, io_lib:format("the map field ~ts uses =>: in a pattern "
                                  "write Key := Pattern", [pp_field(F)])}).

pp_field({_, _, K, V}) -> [pp(K), " => ", pp(V)].

-spec not_pattern(erl_parse:abstract_expr(), iodata()) -> no_return().
not_pattern(E, Why) ->
    throw({pattern, lists:flatten(io_lib:format(
                                    "argument pattern ~ts is not supported: ~ts",
                                    [pp(E), Why]))}).

%% The guard sequence of the tokens after `when' (none without a guard).
parse_guards(none, _End) ->
    {ok, none};
parse_guards({_When, []}, _End) ->
    {error, "nothing after when: write a guard such as when N > 0"};
parse_guards({{'when', L}, Toks}, End) ->
    Form = [{atom, L, f}, {'(', L}, {')', L}, {'when', L}] ++ Toks
        ++ [{'->', End}, {atom, End, ok}, {dot, End}],
    case erl_parse:parse_form(Form) of
        {ok, {function, _, f, 0, [{clause, _, [], GuardSeq, _}]}} ->
            {ok, GuardSeq};
        {error, {End, _, _}} ->
            {error, "the guard ends too early"};
        {error, {Loc, Mod, Err}} ->
            {error, io_lib:format("syntax error in the guard at column ~w: ~ts",
                                  [column(Loc), Mod:format_error(Err)])}
    end.

guards(none, _Vars) ->
    {ok, [[]]};
guards(GuardSeq, Vars) ->
    try
        {ok, [[guard(G, Vars) || G <- Guard] || Guard <- GuardSeq]}
    catch
        throw:{guard, Why} -> {error, Why}
    end.

guard({var, _, '_'}, _) ->
    throw({guard, "_ cannot be used in a guard"});
guard({var, _, V}, Vars) ->
    case Vars of
        #{V := Ms} -> Ms;
        _ -> throw({guard, lists:flatten(
                             io_lib:format("variable ~ts in the guard is not "
                                           "bound in the argument patterns",
                                           [V]))})
    end;
guard({integer, _, I}, _) -> I;
guard({float, _, F}, _) -> F;
guard({char, _, C}, _) -> C;
guard({tuple, _, Es} = E, Vars) ->
    case literal(E) of
        {ok, T} -> {const, T};
        error -> {list_to_tuple([guard(X, Vars) || X <- Es])}
    end;
guard({cons, _, H, T} = E, Vars) ->
    case literal(E) of
        {ok, L} -> {const, L};
        error -> [guard(H, Vars) | guard(T, Vars)]
    end;
guard({map, _, Fields} = E, Vars) ->
    case literal(E) of
        {ok, M} -> {const, M};
        error -> maps:from_list([guard_field(F, Vars) || F <- Fields])
    end;
guard({op, _, Op, A, B}, Vars) ->
    case lists:member(Op, ?GUARD_OPS) of
        true -> {Op, guard(A, Vars), guard(B, Vars)};
        false -> throw({guard, lists:flatten(
                                 io_lib:format("the operator ~ts cannot be used "
                                               "in a guard", [Op]))})
    end;
guard({op, _, '-', {Num, _, N}}, _) when Num =:= integer; Num =:= float ->
    -N;
guard({op, _, Op, A}, Vars) when Op =:= 'not'; Op =:= '-'; Op =:= '+'; Op =:= 'bnot' ->
    {Op, guard(A, Vars)};
guard({call, _, {remote, _, {atom, _, erlang}, {atom, _, F}}, Args}, Vars) ->
    guard_call(F, Args, Vars);
guard({call, _, {atom, _, F}, Args}, Vars) ->
    guard_call(F, Args, Vars);
guard({call, _, Fun, Args}, _) ->
    throw({guard, lists:flatten(
                    io_lib:format("~ts/~w cannot be used in a guard (only "
                                  "guard BIFs such as is_integer/1, "
                                  "element/2, map_get/2)",
                                  [pp(Fun), length(Args)]))});
guard(E, _) ->
    case literal(E) of
        {ok, T} -> {const, T};
        error -> throw({guard, lists:flatten(
                                 io_lib:format("~ts is not supported in a guard",
                                               [pp(E)]))})
    end.

%% A map built in a guard: keys and values are expressions.
guard_field({map_field_assoc, _, K, V}, Vars) ->
    {guard(K, Vars), guard(V, Vars)};
guard_field({map_field_exact, _, K, V}, _) ->
    throw({guard, lists:flatten(
                    io_lib:format("the map field ~ts := ~ts builds no map: in a "
                                  "guard write Key => Value", [pp(K), pp(V)]))}).

guard_call(F, Args, Vars) ->
    case lists:member({F, length(Args)}, ?GUARD_BIFS) of
        true ->
            list_to_tuple([F | [guard(A, Vars) || A <- Args]]);
        false ->
            throw({guard, lists:flatten(
                            io_lib:format("~ts/~w cannot be used in a guard "
                                          "(only guard BIFs such as "
                                          "is_integer/1, element/2, "
                                          "map_get/2)", [F, length(Args)]))})
    end.

literal(E) ->
    try {ok, erl_parse:normalise(E)}
    catch _:_ -> error
    end.

%%% Resolving -----------------------------------------------------------------

%% @equiv resolve(Spec, #{})
-spec resolve(spec()) ->
          {ok, [{call(), [mfa_pattern()]}]} | {error, {bad_spec, term(), string() | binary()}}.
resolve(Spec) ->
    resolve(Spec, #{}).

%% @doc Reads a spec like {@link parse/2}, loads the modules it names and
%% checks that each call spec matches at least one function. Returns the
%% call specs with `{M, F, A}' patterns that OTP's trace functions accept
%% (`M:_/2' is expanded into the functions of arity 2).
-spec resolve(spec(), opts()) ->
          {ok, [{call(), [mfa_pattern()]}]} | {error, {bad_spec, term(), string() | binary()}}.
resolve(Spec, Opts) ->
    case parse(Spec, Opts) of
        {ok, Calls} -> resolve_calls(Calls, []);
        {error, _} = E -> E
    end.

resolve_calls([], Acc) ->
    {ok, lists:reverse(Acc)};
resolve_calls([#{text := Text} = C | T], Acc) ->
    case targets(C) of
        {ok, MFAs} -> resolve_calls(T, [{C, MFAs} | Acc]);
        {error, Why} when map_get(syntax, C) =:= elixir ->
            {error, {bad_spec, unicode:characters_to_binary(Text),
                     unicode:characters_to_binary(Why)}};
        {error, Why} -> {error, {bad_spec, Text, lists:flatten(Why)}}
    end.

targets(#{module := M, function := F, arity := A} = C) ->
    Elixir = maps:get(syntax, C, erlang) =:= elixir,
    case code:ensure_loaded(M) of
        {module, M} ->
            Fs = M:module_info(functions),
            case [FA || {F1, A1} = FA <- Fs,
                        F =:= '_' orelse F =:= F1,
                        A =:= '_' orelse A =:= A1] of
                [] when Elixir -> {error, tracekit_spec_ex:no_match(M, F, A, Fs)};
                [] -> {error, no_match(M, F, A, Fs)};
                _ when F =:= '_', A =/= '_' ->
                    {ok, [{M, F1, A} || {F1, A1} <- Fs, A1 =:= A]};
                _ -> {ok, [{M, F, A}]}
            end;
        {error, Why} when Elixir ->
            {error, tracekit_spec_ex:not_loaded(M, Why)};
        {error, Why} ->
            {error, [io_lib:format("module ~tw is not loaded and cannot be "
                                   "loaded (~tw)", [M, Why]), "; ", ?EXAMPLE]}
    end.

no_match(M, F, A, Fs) ->
    Why = case [A1 || {F1, A1} <- Fs, F1 =:= F] of
              _ when F =:= '_' ->
                  io_lib:format("module ~tw has no function of arity ~w", [M, A]);
              [] ->
                  io_lib:format("module ~tw has no function ~tw", [M, F]);
              Arities ->
                  io_lib:format("module ~tw has no function ~tw/~w; it has ~ts",
                                [M, F, A, lists:join(", ", [io_lib:format("~tw/~w", [F, X])
                                                            || X <- lists:usort(Arities)])])
          end,
    Same = [FA || {F1, _} = FA <- Fs, F1 =:= F],
    Exported = [FA || {F1, _} = FA <- M:module_info(exports),
                      F1 =/= module_info],
    case Same ++ Exported of
        [{EF, EA} | _] ->
            io_lib:format("~ts; for example \"~tw:~tw/~w\"", [Why, M, EF, EA]);
        [] ->
            [Why, "; ", ?EXAMPLE]
    end.

%% @doc True when return values of `{M, F, A}' are to be shown: when some
%% call spec matching that function asked for `return' (with only
%% `exception' the VM also reports returns, and they are not shown).
-spec shows_return([call()], mfa()) -> boolean().
shows_return(Calls, MFA) ->
    try lists:any(fun(C) -> shows_return1(C, MFA) end, Calls)
    catch error:_ -> erlang:error(badarg, [Calls, MFA])
    end.

shows_return1(#{module := M1, function := F1, arity := A1, return := R}, {M, F, A}) ->
    R andalso M1 =:= M andalso (F1 =:= '_' orelse F1 =:= F)
        andalso (A1 =:= '_' orelse A1 =:= A).

%% @doc The text of a call spec as the user wrote it (or the term).
-spec format(call()) -> string().
format(#{text := T}) -> T;
format(Call) -> erlang:error(badarg, [Call]).
