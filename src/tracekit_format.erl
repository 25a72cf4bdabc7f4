%% @doc One readable line per trace event.
%%
%% ```
%% 12:03:04.123456 <0.123.0> (my_server) my_mod:handle_call({get,k}, {<0.99.0>,[alias|#Ref<0.1.2.3>]}, #{})
%% 12:03:04.123470 <0.123.0> (my_server) my_mod:handle_call/3 -> {reply,ok,#{}}
%% 12:03:04.123475 <0.1.0> ! {hello} -> <0.2.0> (name)
%% 12:03:04.123480 <0.2.0> (name) << {hello}
%% '''
%% Events are the terms a process tracer receives (`{trace, ...}',
%% `{trace_ts, ...}', `{seq_trace, ...}'), also as a {@link tracekit_ring}
%% with a `payload' limit hands them out: any part may be the marker
%% `...', a list may end in it, a binary be `{..., Prefix, Size}' and a
%% fun `{..., fun, Name}'. Any term gives a line: what is not an event is
%% shown as a term. Terms are shortened to a depth (io_lib's `~P') and
%% every line to a number of characters. Bad options raise `badarg'.
%%
%% The default options give the plain text that `tracekit_file:format'
%% prints. Options turn on what reads better in a shell (tracekit,
%% tracekit_cth and the report it writes turn them on):
%% <dl>
%% <dt>`records'</dt><dd>record definitions ({@link tracekit_records}):
%%   tuples that are such records print as `#state{count = 3,name = x}'.</dd>
%% <dt>`refs'</dt><dd>short tags for references ({@link tag_refs/2}):
%%   `#Ref<0.0.1283.1587135558.251461633.83994>' prints as
%%   `#Ref<..83994>'.</dd>
%% <dt>`stacks'</dt><dd>a number N: the `{caller, MFA}' and `{stack,
%%   Frames}' that `-> caller' and `-> stack' specs add to call events
%%   print as ` <- m:f/1 <- m:g/0', at most N frames (` <- ...' when
%%   there were more).</dd>
%% <dt>`colour'</dt><dd>`true': ANSI colours for pids and names, calls,
%%   returns, exceptions, sends and receives (the line length counts only
%%   what is visible).</dd>
%% <dt>`merge_seq'</dt><dd>for {@link events/2}: a send or receive seen
%%   by both process tracing and seq_trace prints as one line, the
%%   process trace's with the seq_trace serial appended (and, for a
%%   receive, the sender).</dd>
%% <dt>`short_refs'</dt><dd>for {@link events/2}: tag references along
%%   the events (as `refs' does with a table made by {@link
%%   tag_refs/2}).</dd>
%% <dt>`syntax'</dt><dd>`erlang' (default) or `elixir': terms by Elixir's
%%   `Kernel.inspect/2' (its `limit' is `depth', its `printable_limit'
%%   `line_length'; structs as structs, strings as strings, no records),
%%   calls as `MyApp.Server.handle_call(...)' and `:lists.seq/2', pids as
%%   `#PID<0.105.0>', references as `#Reference<..98937>'. Elixir must be
%%   loaded in the node (else `badarg').</dd>
%% </dl>
-module(tracekit_format).

-export([event/2, events/2, stream/1, next/2, stream_set/2, stream_opts/1, term/2, pid/2,
         names/1, time/1, summary/1, default_opts/0, message_label/2, message_label/3,
         tag_refs/2, new_ref_table/0, ref_tags/1, reason/1]).

-export_type([opts/0, ref_table/0, stream/0]).

%% `depth': how deep terms are printed (default 20); `line_length': the
%% most characters of a line (default 240); `names': registered names of
%% processes, shown beside their pids; the others as above.
-type opts() :: #{depth => pos_integer(),
                  line_length => pos_integer(),
                  names => #{pid() | port() => atom()},
                  records => tracekit_records:defs(),
                  refs => #{reference() => string()},
                  stacks => false | pos_integer(),
                  colour => boolean(),
                  merge_seq => boolean(),
                  short_refs => boolean(),
                  syntax => erlang | elixir}.
%% The tags given to references so far: the table `refs' takes, and the
%% tags in use.
-opaque ref_table() :: {#{reference() => string()}, #{string() => []}}.
%% Lines of events one after the other (stream/1, next/2): the options,
%% and with `short_refs' the reference tags so far.
-opaque stream() :: {opts(), ref_table() | none}.

-define(ELLIPSIS, "...").
%% What the ring puts where it cut a term.
-define(CUT, '...').
%% How many terms of a term are looked at for references, how many
%% references of one term get their tag, and how many a trace tags.
-define(REF_WALK, 4096).
-define(REF_SLOTS, 32).
-define(MAX_REFS, 10000).
%% How far apart (in events) the two views of one message may be.
-define(SEQ_WINDOW, 16).

%% @doc The defaults of the formatting options.
-spec default_opts() -> #{depth := pos_integer(), line_length := pos_integer(),
                          names := #{}}.
default_opts() ->
    #{depth => 20, line_length => 240, names => #{}}.

%% @doc Formats one event as one line (without a newline).
-spec event(term(), opts()) -> unicode:chardata().
event(Event, Opts0) ->
    line(Event, opts(Opts0, [Event, Opts0]), []).

%% @doc Formats events, one line each (without newlines), with
%% `merge_seq' and `short_refs' as well as the options of {@link
%% event/2}. Returns each event that has a line with its line (with
%% `merge_seq', the seq_trace event of a message that has the line of its
%% process trace event has none).
-spec events([term()], opts()) -> [{term(), unicode:chardata()}].
events(Events, Opts0) when is_list(Events) ->
    try length(Events)
    catch error:badarg -> erlang:error(badarg, [Events, Opts0])
    end,
    Opts = opts(Opts0, [Events, Opts0]),
    Merged = case Opts of
                 #{merge_seq := true} -> pair_seq(Events);
                 _ -> #{}
             end,
    {Lines, _} =
        lists:mapfoldl(
          fun({I, E}, Stream) ->
                  case Merged of
                      #{I := drop} ->
                          {drop, Stream};
                      _ ->
                          {Line, Stream1} = next(E, maps:get(I, Merged, none), Stream),
                          {{E, Line}, Stream1}
                  end
          end, stream1(Opts), lists:enumerate(Events)),
    [L || L <- Lines, L =/= drop];
events(Events, Opts) ->
    erlang:error(badarg, [Events, Opts]).

%% @doc A stream of lines: {@link next/2} gives each event's line as
%% {@link events/2} gives it (without `merge_seq'), one event at a time,
%% in bounded memory; with `short_refs' the references are tagged along
%% the stream.
-spec stream(opts()) -> stream().
stream(Opts0) ->
    stream1(opts(Opts0, [Opts0])).

stream1(Opts) ->
    {Opts, case maps:get(short_refs, Opts, false) of
               true -> new_ref_table();
               false -> none
           end}.

%% @doc The line of the next event of a stream (without a newline).
-spec next(term(), stream()) -> {unicode:chardata(), stream()}.
next(Event, {_, _} = Stream) ->
    next(Event, none, Stream);
next(Event, Stream) ->
    erlang:error(badarg, [Event, Stream]).

next(E, Merged, {Opts, none} = Stream) ->
    {line(E, Opts, suffix(Merged, Opts)), Stream};
next(E, Merged, {Opts, Table}) ->
    Table1 = tag_refs(E, Table),
    O = Opts#{refs => ref_tags(Table1)},
    {line(E, O, suffix(Merged, O)), {Opts, Table1}}.

%% @doc A stream with some of its options changed (`names' learnt along
%% the way, say), its reference tags kept.
-spec stream_set(opts(), stream()) -> stream().
stream_set(Opts, {Opts0, Table}) when is_map(Opts) ->
    {opts(maps:merge(Opts0, Opts), [Opts, {Opts0, Table}]), Table};
stream_set(Opts, Stream) ->
    erlang:error(badarg, [Opts, Stream]).

%% @doc The options a stream prints with now: for {@link term/2} and
%% {@link pid/2} of terms of its events (references with their tags so
%% far).
-spec stream_opts(stream()) -> opts().
stream_opts({Opts, none}) -> Opts;
stream_opts({Opts, Table}) -> Opts#{refs => ref_tags(Table)}.

line(Event, Opts, Suffix) ->
    {Ts, Body} = split(Event),
    Line = case Ts of
               none -> [Body(Opts), Suffix];
               _ -> [time(Ts), " ", Body(Opts), Suffix]
           end,
    case Opts of
        #{colour := true} -> render(Line, maps:get(line_length, Opts));
        _ -> cut(unicode:characters_to_list(Line), maps:get(line_length, Opts))
    end.

%% The options with the defaults filled in; badarg (for the call with
%% Args) when one is not what it must be.
opts(Opts0, Args) when is_map(Opts0) ->
    case maps:merge(default_opts(), Opts0) of
        #{depth := D, line_length := L, names := N} = Opts
          when is_integer(D), D > 0, is_integer(L), L > 0, is_map(N) ->
            case lists:all(fun(K) -> good(K, Opts) end,
                           [records, refs, stacks, colour, merge_seq, short_refs, syntax]) of
                true -> Opts;
                false -> erlang:error(badarg, Args)
            end;
        _ ->
            erlang:error(badarg, Args)
    end;
opts(_, Args) ->
    erlang:error(badarg, Args).

good(K, Opts) ->
    case Opts of
        #{K := V} when K =:= records; K =:= refs -> is_map(V);
        #{stacks := V} when K =:= stacks -> V =:= false orelse (is_integer(V) andalso V > 0);
        #{syntax := V} when K =:= syntax -> V =:= erlang orelse (V =:= elixir andalso
                                                                 tracekit_ex:loaded());
        #{K := V} -> is_boolean(V);
        #{} -> true
    end.

%% Splits an event into its timestamp and a function that formats the
%% rest.
split(E) when element(1, E) =:= trace_ts, tuple_size(E) >= 5 ->
    L = tuple_to_list(E),
    {lists:last(L), body(E, [trace | lists:droplast(tl(L))])};
split(E) when element(1, E) =:= trace ->
    {none, body(E, tuple_to_list(E))};
split({seq_trace, Label, Info, Ts}) ->
    {Ts, seq(Label, Info)};
split({seq_trace, Label, Info}) ->
    {none, seq(Label, Info)};
split(E) ->
    {none, fun(O) -> t(E, O) end}.

body(_E, [trace, P, Tag | Rest]) when is_atom(Tag) ->
    fun(O) -> [p(P, O), " ", what(Tag, Rest, O)] end;
body(E, _) ->
    fun(O) -> t(E, O) end.

what(call, [{M, F, Args} | Extra], O) ->
    [mfargs(M, F, Args, O), extra(Extra, O)];
what(return_from, [{M, F, A}, Val | Extra], O) ->
    [paint(return, [mfa(M, F, A, O), " ->"], O), " ", t(Val, O), extra(Extra, O)];
what(exception_from, [{M, F, A}, {Class, Reason} | Extra], O) ->
    [paint(exception, [mfa(M, F, A, O), " raised ", atom(Class), ":", raised_sep(O)], O),
     t(Reason, O),
     extra(Extra, O)];
what(return_to, [{M, F, A} | Extra], O) ->
    ["returned to ", mfa(M, F, A, O), extra(Extra, O)];
what(return_to, [undefined | Extra], O) ->
    ["returned to an untraced function", extra(Extra, O)];
what(send, [Msg, To | Extra], O) ->
    [paint(send, "!", O), " ", t(Msg, O), " -> ", dest(To, O), extra(Extra, O)];
what(send_to_non_existing_process, [Msg, To | Extra], O) ->
    [paint(send, "!", O), " ", t(Msg, O), " -> ", dest(To, O), " (no such process)",
     extra(Extra, O)];
what('receive', [Msg | Extra], O) ->
    [paint('receive', "<<", O), " ", t(Msg, O), extra(Extra, O)];
what(spawn, [Child, {M, F, Args} | Extra], O) ->
    ["spawned ", p(Child, O), " as ", mfargs(M, F, Args, O), extra(Extra, O)];
what(spawned, [Parent, {M, F, Args} | Extra], O) ->
    ["was spawned by ", p(Parent, O), " as ", mfargs(M, F, Args, O),
     extra(Extra, O)];
what(exit, [Reason | Extra], O) ->
    ["exited: ", t(Reason, O), extra(Extra, O)];
what(link, [P | Extra], O) -> ["linked to ", p(P, O), extra(Extra, O)];
what(unlink, [P | Extra], O) -> ["unlinked from ", p(P, O), extra(Extra, O)];
what(getting_linked, [P | Extra], O) ->
    ["got linked by ", p(P, O), extra(Extra, O)];
what(getting_unlinked, [P | Extra], O) ->
    ["got unlinked by ", p(P, O), extra(Extra, O)];
what(register, [Name | Extra], O) ->
    ["registered as ", t(Name, O), extra(Extra, O)];
what(unregister, [Name | Extra], O) ->
    ["unregistered ", t(Name, O), extra(Extra, O)];
what(Tag, [{M, F, A} | Extra], O) when is_atom(M), is_atom(F), is_integer(A) ->
    [atom_to_list(Tag), " ", mfa(M, F, A, O), extra(Extra, O)];
what(Tag, Rest, O) ->
    [atom_to_list(Tag) | [[" ", t(X, O)] || X <- Rest]].

%% A match spec's {message, X} result (or a scheduler id) after the event;
%% with `stacks', the caller or stack of a `-> caller' or `-> stack' spec
%% as a chain of functions.
extra([], _) -> [];
extra(Xs, O) -> [extra1(X, O) || X <- Xs].

extra1({caller, Caller}, #{stacks := N} = O) when is_integer(N) ->
    case frame(Caller, O) of
        {ok, Text} -> paint(stack, [" <- ", Text], O);
        error when Caller =:= undefined -> paint(stack, " <- (caller unknown)", O);
        error -> [" (", t({caller, Caller}, O), ")"]
    end;
extra1({stack, Frames} = X, #{stacks := N} = O) when is_integer(N), is_list(Frames) ->
    try [begin {ok, T} = frame(F, O), T end || F <- Frames] of
        Texts ->
            {Shown, More} = case length(Texts) > N of
                                true -> {lists:sublist(Texts, N), [" <- ..."]};
                                false -> {Texts, []}
                            end,
            paint(stack, [[[" <- ", T] || T <- Shown], More], O)
    catch
        error:_ -> [" (", t(X, O), ")"]
    end;
extra1(X, O) ->
    [" (", t(X, O), ")"].

%% A frame of a stack (or a caller) as Module:Function/Arity.
frame({M, F, A}, O) -> frame({M, F, A, []}, O);
frame({M, F, A, _}, O) when is_atom(M), is_atom(F), is_integer(A), A >= 0 ->
    {ok, mfa(M, F, A, O)};
frame({M, F, Args, _}, O) when is_atom(M), is_atom(F), is_list(Args) ->
    try length(Args) of
        A -> {ok, mfa(M, F, A, O)}
    catch
        error:badarg -> error
    end;
frame(_, _) -> error.

seq(Label, Info) ->
    fun(O) -> ["seq_trace ", t(Label, O), ": ", seq_info(Info, O)] end.

seq_info({send, Serial, From, To, Msg}, O) ->
    [p(From, O), " ", paint(send, "!", O), " ", t(Msg, O), " -> ", dest(To, O), " ",
     serial(Serial)];
seq_info({'receive', Serial, From, To, Msg}, O) ->
    [p(To, O), " ", paint('receive', "<<", O), " ", t(Msg, O), " from ", p(From, O), " ",
     serial(Serial)];
seq_info({print, Serial, From, _, Info}, O) ->
    [p(From, O), " print ", t(Info, O), " ", serial(Serial)];
seq_info(Info, O) ->
    t(Info, O).

serial({Last, Serial}) -> io_lib:format("[~w,~w]", [Last, Serial]);
serial(S) -> io_lib:format("[~tw]", [S]).

%% A call with its arguments. The arguments may have been cut by the ring
%% (`...' for all of them, or a list that ends in `...'), or be their
%% number.
mfargs(M, F, Args, O) when is_list(Args); Args =:= ?CUT ->
    [paint(call, mf(M, F, O), O), "(", args(Args, "", O), ")"];
mfargs(M, F, Arity, O) ->
    paint(call, mfa(M, F, Arity, O), O).

args([], _Sep, _O) -> [];
args([A | As], Sep, O) -> [Sep, t(A, O) | args(As, ", ", O)];
args(?CUT, Sep, _O) -> [Sep, ?ELLIPSIS];
args(Tail, _Sep, O) -> [" | ", t(Tail, O)].

mfa(M, F, A, #{syntax := elixir}) when is_atom(M), is_atom(F), is_integer(A) ->
    tracekit_ex:mfa(M, F, A);
mfa(M, F, A, _O) ->
    io_lib:format("~tw:~ts/~w", [M, atom(F), A]).

mf(M, F, #{syntax := elixir}) when is_atom(M), is_atom(F) ->
    tracekit_ex:mf(M, F);
mf(M, F, _O) ->
    [atom(M), ":", atom(F)].

%% Elixir's text puts a space between the class and the reason.
raised_sep(#{syntax := elixir}) -> " ";
raised_sep(_) -> "".

atom(A) -> io_lib:format("~tw", [A]).

%% Where a message was sent: a pid, a registered name or (a reference) an
%% alias.
dest(To, O) when is_reference(To) -> ["alias ", t(To, O)];
dest(To, O) -> p(To, O).

p(P, #{syntax := elixir} = O) when not is_pid(P), not is_port(P) ->
    paint(pid, t(P, O), O);
p(P, O) -> paint(pid, pid(P, O), O).

%% @doc A term shortened to the depth and line length of the options
%% (with the options' records and reference tags).
-spec term(term(), opts()) -> unicode:chardata().
term(T, Opts0) ->
    t(T, opts(Opts0, [T, Opts0])).

%% In Elixir syntax Kernel.inspect/2, its limit the depth and its
%% printable_limit the line length, with the reference tags.
t(T, #{syntax := elixir, depth := D, line_length := L} = O) ->
    Print = fun(X) -> tracekit_ex:inspect(X, #{limit => D, printable_limit => L}) end,
    try
        Refs = maps:get(refs, O, #{}),
        {T1, Placed} = case map_size(Refs) of
                           0 -> {T, []};
                           _ -> place_refs(T, Refs)
                       end,
        case unplace(Print(T1), [{A, ex_tag(Tag), N} || {A, Tag, N} <- Placed], elixir) of
            {ok, Text} -> Text;
            text_like_a_placeholder -> Print(T)
        end
    catch
        _:_ -> io_lib:format("~0tP", [T, D], [{chars_limit, L}])
    end;
%% Without records and reference tags, io_lib's ~P as it always was.
t(T, #{depth := D, line_length := L} = O) ->
    Defs = maps:get(records, O, #{}),
    Refs = maps:get(refs, O, #{}),
    case map_size(Defs) =:= 0 andalso map_size(Refs) =:= 0 of
        true ->
            io_lib:format("~0tP", [T, D], [{chars_limit, L}]);
        false ->
            {T1, Placed} = case map_size(Refs) of
                               0 -> {T, []};
                               _ -> place_refs(T, Refs)
                           end,
            Pretty = [{depth, D}, {chars_limit, L}, {encoding, unicode},
                      {line_length, 0}, {column, 1}],
            Print = fun(X) ->
                            io_lib_pretty:print(X, case map_size(Defs) of
                                                       0 -> Pretty;
                                                       _ -> [{record_print_fun,
                                                              tracekit_records:print_fun(Defs)}
                                                             | Pretty]
                                                   end)
                    end,
            case unplace(Print(T1), Placed, erlang) of
                {ok, Text} -> Text;
                text_like_a_placeholder -> Print(T)
            end
    end.

%%% Reference tags ------------------------------------------------------------

%% @doc An empty table of reference tags.
-spec new_ref_table() -> ref_table().
new_ref_table() ->
    {#{}, #{}}.

%% @doc The tags of a table, as option `refs' takes them.
-spec ref_tags(ref_table()) -> #{reference() => string()}.
ref_tags({Tags, _}) ->
    Tags.

%% @doc Gives a tag to each reference in `Term' that has none yet: the last
%% number of the reference (`#Ref<..83994>'), or the last two when that
%% tag is taken by another reference, or else the whole reference. A
%% reference keeps its tag for as long as the table is used. At most
%% 10000 references are tagged (the others print in full), and only
%% those among the first 4096 parts of a term are looked at.
-spec tag_refs(term(), ref_table()) -> ref_table().
tag_refs(Term, {Tags, _} = Table) when map_size(Tags) < ?MAX_REFS ->
    {_, Refs} = refs(Term, {?REF_WALK, []}),
    lists:foldl(fun tag_ref/2, Table, lists:reverse(Refs));
tag_refs(_Term, {_, _} = Table) ->
    Table;
tag_refs(Term, Table) ->
    erlang:error(badarg, [Term, Table]).

tag_ref(Ref, {Tags, _Taken} = Table) when is_map_key(Ref, Tags); map_size(Tags) >= ?MAX_REFS ->
    Table;
tag_ref(Ref, {Tags, Taken}) ->
    Full = ref_to_list(Ref),
    Parts = string:lexemes(lists:sublist(Full, 6, length(Full) - 6), "."),
    Short = [lists:flatten(["#Ref<..", lists:join(".", lists:nthtail(length(Parts) - N, Parts)), ">"])
             || N <- [1, 2], length(Parts) > N],
    Tag = case [T || T <- Short, not is_map_key(T, Taken)] of
              [T | _] -> T;
              [] -> Full
          end,
    {Tags#{Ref => Tag}, Taken#{Tag => []}}.

%% The references of a term, in the order met, looking at no more than
%% Budget parts (a tuple or map larger than what is left is not looked
%% into).
refs(R, {B, Rs}) when is_reference(R) -> {B - 1, [R | Rs]};
refs(T, {B, Rs}) when is_tuple(T), tuple_size(T) < B -> refs_list(tuple_to_list(T), {B - 1, Rs});
refs(M, {B, Rs}) when is_map(M), 2 * map_size(M) < B ->
    refs_list(lists:append([[K, V] || K := V <- M]), {B - 1, Rs});
refs([H | T], {B, Rs}) -> refs_list([H | T], {B - 1, Rs});
refs(_, {B, Rs}) -> {B - 1, Rs}.

refs_list(_, {0, _} = Acc) -> Acc;
refs_list([H | T], Acc) -> refs_list(T, refs(H, Acc));
refs_list([], {B, Rs}) -> {B - 1, Rs};
refs_list(Tail, Acc) -> refs(Tail, Acc).

%% The term with its tagged references replaced by placeholder atoms (a
%% fixed set), and which placeholder stands for which tag. A term that
%% has such an atom of its own keeps its references whole.
place_refs(T, Refs) ->
    try place(T, Refs, {?REF_WALK, []}) of
        {T1, {_, Placed}} -> {T1, Placed}
    catch
        throw:placeholder_in_term -> {T, []}
    end.

place(T, _Refs, {0, _} = Acc) ->
    {T, Acc};
place(R, Refs, {B, Placed}) when is_reference(R) ->
    Tag = maps:get(R, Refs, none),
    case lists:keyfind(Tag, 2, Placed) of
        {Atom, _, N} ->
            {Atom, {B - 1, lists:keyreplace(Atom, 1, Placed, {Atom, Tag, N + 1})}};
        false when length(Placed) < ?REF_SLOTS, Tag =/= none ->
            %% A tag that is not text (refs given by hand) leaves the
            %% reference whole.
            case io_lib:char_list(Tag) of
                true ->
                    Atom = placeholder(length(Placed) + 1),
                    {Atom, {B - 1, [{Atom, Tag, 1} | Placed]}};
                false ->
                    {R, {B - 1, Placed}}
            end;
        false ->
            {R, {B - 1, Placed}}
    end;
place(T, Refs, {B, Placed}) when is_tuple(T), tuple_size(T) < B ->
    {L, Acc} = place_list(tuple_to_list(T), Refs, {B - 1, Placed}),
    {list_to_tuple(L), Acc};
place(M, Refs, {B, Placed}) when is_map(M), 2 * map_size(M) < B ->
    {KVs, Acc} = lists:mapfoldl(fun({K, V}, A0) ->
                                        {K1, A1} = place(K, Refs, A0),
                                        {V1, A2} = place(V, Refs, A1),
                                        {{K1, V1}, A2}
                                end, {B - 1, Placed}, maps:to_list(M)),
    {maps:from_list(KVs), Acc};
place([_ | _] = L, Refs, {B, Placed}) ->
    place_list(L, Refs, {B - 1, Placed});
place(A, _Refs, {B, Placed}) when is_atom(A) ->
    case atom_to_binary(A) of
        <<"$tracekit_ref_", _/binary>> -> throw(placeholder_in_term);
        _ -> {A, {B - 1, Placed}}
    end;
place(T, _Refs, {B, Placed}) ->
    {T, {B - 1, Placed}}.

place_list(L, _Refs, {0, _} = Acc) ->
    {L, Acc};
place_list([H | T], Refs, Acc0) ->
    {H1, Acc1} = place(H, Refs, Acc0),
    {T1, Acc2} = place_list(T, Refs, Acc1),
    {[H1 | T1], Acc2};
place_list([], _Refs, Acc) ->
    {[], Acc};
place_list(Tail, Refs, Acc) ->
    place(Tail, Refs, Acc).

placeholder(N) when N =< ?REF_SLOTS ->
    list_to_atom("$tracekit_ref_" ++ integer_to_list(N)).

%% The text with each placeholder replaced by its tag; or
%% text_like_a_placeholder when the text shows a placeholder more often
%% than it was put in the term (a string or binary of the term that reads
%% like one).
unplace(Text, [], _Syntax) ->
    {ok, Text};
unplace(Text, Placed, Syntax) ->
    S0 = unicode:characters_to_list(Text),
    try lists:foldl(fun({Atom, Tag, N}, S) ->
                            Parts = string:split(S, atom_text(Atom, Syntax), all),
                            case length(Parts) - 1 =< N of
                                true -> lists:join(Tag, Parts);
                                false -> throw(text_like_a_placeholder)
                            end
                    end, S0, Placed) of
        S -> {ok, S}
    catch
        throw:text_like_a_placeholder -> text_like_a_placeholder
    end.

atom_text(Atom, erlang) ->
    lists:flatten(io_lib:format("~tw", [Atom]));
atom_text(Atom, elixir) ->
    unicode:characters_to_list(tracekit_ex:module(Atom)).

%% A reference's tag as Elixir prints references: #Reference<..98937>.
ex_tag("#Ref<" ++ Rest) -> "#Reference<" ++ Rest;
ex_tag(Tag) -> Tag.

%%% Colour ----------------------------------------------------------------------

%% Text in the colour of its role, when colours are on.
paint(Role, Text, #{colour := true}) -> {'$paint', Role, Text};
paint(_Role, Text, _O) -> Text.

sgr(pid) -> "36";
sgr(call) -> "1";
sgr(return) -> "32";
sgr(exception) -> "31";
sgr(send) -> "33";
sgr('receive') -> "35";
sgr(stack) -> "2".

%% A line with colours: cut to Max visible characters, each painted part
%% between its colour and a reset.
render(Line, Max) ->
    Segs = lists:reverse(segs(Line, [], [])),
    Visible = string:length([S || {_, S} <- Segs]),
    Shown = case Visible > Max of
                true when Max > length(?ELLIPSIS) ->
                    take(Segs, Max - length(?ELLIPSIS)) ++ [{none, ?ELLIPSIS}];
                true ->
                    [{none, lists:sublist(?ELLIPSIS, Max)}];
                false ->
                    Segs
            end,
    [case Role of
         none -> S;
         _ -> ["\e[", sgr(Role), "m", S, "\e[0m"]
     end || {Role, S} <- Shown, S =/= []].

%% Segments {Role, Text} (reversed), plain text gathered into one segment
%% until the next painted part. Parts without paint are made text by
%% unicode:characters_to_list/1 at once.
segs(X, Plain, Acc) ->
    {Plain1, Acc1} = segs_in(X, Plain, Acc),
    flush(Plain1, Acc1).

segs_in({'$paint', Role, Text}, Plain, Acc) ->
    {[], [{Role, unicode:characters_to_list(unpaint(Text))} | flush(Plain, Acc)]};
segs_in(L, Plain, Acc) when is_list(L) ->
    try unicode:characters_to_list(L) of
        Text when is_list(Text) -> {[Text | Plain], Acc}
    catch
        error:badarg ->
            lists:foldl(fun(X, {P, A}) -> segs_in(X, P, A) end, {Plain, Acc}, L)
    end;
segs_in(C, Plain, Acc) when is_integer(C) -> {[[C] | Plain], Acc};
segs_in(B, Plain, Acc) when is_binary(B) -> {[unicode:characters_to_list(B) | Plain], Acc}.

flush([], Acc) -> Acc;
flush(Plain, Acc) -> [{none, lists:append(lists:reverse(Plain))} | Acc].

%% Painted parts inside a painted part take its colour.
unpaint({'$paint', _, Text}) -> unpaint(Text);
unpaint(L) when is_list(L) -> [unpaint(X) || X <- L];
unpaint(X) -> X.

%% The first N visible characters of the segments.
take([], _) -> [];
take(_, 0) -> [];
take([{Role, S} | Rest], N) ->
    case string:length(S) of
        Len when Len =< N -> [{Role, S} | take(Rest, N - Len)];
        _ -> [{Role, string:slice(S, 0, N)}]
    end.

%%% One line per message ------------------------------------------------------

%% The events of a list that are one message seen twice, by process
%% tracing and by seq_trace: the index of the process trace's event =>
%% {Label, Serial, From} of the seq_trace event, whose index => drop.
pair_seq(Events) ->
    {_, _, Pairs} =
        lists:foldl(fun({I, E}, {Procs, Seqs, Acc}) ->
                            case view(E) of
                                {proc, Key} ->
                                    case take_near(Key, I, Seqs) of
                                        {J, Info, Seqs1} ->
                                            {Procs, Seqs1, Acc#{I => Info, J => drop}};
                                        none ->
                                            {add_near(Key, {I, none}, Procs), Seqs, Acc}
                                    end;
                                {seq, Key, Info} ->
                                    case take_near(Key, I, Procs) of
                                        {J, none, Procs1} ->
                                            {Procs1, Seqs, Acc#{J => Info, I => drop}};
                                        none ->
                                            {Procs, add_near(Key, {I, Info}, Seqs), Acc}
                                    end;
                                none ->
                                    {Procs, Seqs, Acc}
                            end
                    end, {#{}, #{}, #{}}, lists:enumerate(Events)),
    Pairs.

%% What an event says about a message: {proc, Key} for a send or receive
%% of process tracing, {seq, Key, Info} for one of seq_trace, where Key
%% is the same for the two views of one message.
view(E) when is_tuple(E), tuple_size(E) >= 5, (element(1, E) =:= trace orelse
                                                element(1, E) =:= trace_ts),
             element(3, E) =:= send ->
    {proc, {send, element(2, E), element(4, E)}};
view(E) when is_tuple(E), tuple_size(E) >= 4, (element(1, E) =:= trace orelse
                                                element(1, E) =:= trace_ts),
             element(3, E) =:= 'receive' ->
    {proc, {'receive', element(2, E), element(4, E)}};
view({seq_trace, Label, Info}) -> seq_view(Label, Info);
view({seq_trace, Label, Info, _}) -> seq_view(Label, Info);
view(_) -> none.

seq_view(Label, {send, Serial, From, _To, Msg}) ->
    {seq, {send, From, Msg}, {send, Label, Serial, From}};
seq_view(Label, {'receive', Serial, From, To, Msg}) ->
    {seq, {'receive', To, Msg}, {'receive', Label, Serial, From}};
seq_view(_, _) ->
    none.

%% Unpaired views by key, the earliest first, within the window: those
%% that no later event can pair with any more are left out (the same
%% message sent again and again keeps a short list).
add_near(Key, {I, _} = Item, Map) ->
    Near = [X || {J, _} = X <- maps:get(Key, Map, []), I - J < ?SEQ_WINDOW],
    Map#{Key => Near ++ [Item]}.

take_near(Key, I, Map) ->
    case [X || {J, _} = X <- maps:get(Key, Map, []), I - J =< ?SEQ_WINDOW] of
        [] -> none;
        [{J, Info} | Rest] when Rest =:= [] -> {J, Info, maps:remove(Key, Map)};
        [{J, Info} | Rest] -> {J, Info, Map#{Key := Rest}}
    end.

%% What a merged line gets at its end.
suffix(none, _O) ->
    [];
suffix({send, _Label, Serial, _From}, _O) ->
    [" ", serial(Serial)];
suffix({'receive', _Label, Serial, From}, O) ->
    [" from ", p(From, O), " ", serial(Serial)].

%% @doc A pid (or port) with its registered name when it has one.
-spec pid(term(), opts()) -> unicode:chardata().
pid(P, #{syntax := elixir} = Opts) when is_pid(P); is_port(P) ->
    Text = tracekit_ex:inspect(P),
    case Opts of
        #{names := #{P := Name}} when is_atom(Name), Name =/= undefined ->
            [Text, " (", string:trim(tracekit_ex:module(Name), leading, ":"), ")"];
        _ -> Text
    end;
pid(P, Opts) ->
    case Opts of
        #{names := #{P := Name}} when Name =/= undefined -> io_lib:format("~w (~tw)", [P, Name]);
        _ -> io_lib:format("~tw", [P])
    end.

%% @doc The registered names of those of `Pids' that are local, alive and
%% registered.
-spec names([pid()]) -> #{pid() => atom()}.
names(Pids) ->
    try length(Pids) of
        _ -> maps:from_list([{P, N} || P <- Pids, is_pid(P), node(P) =:= node(),
                                       {registered_name, N} <- [erlang:process_info(P, registered_name)]])
    catch
        error:badarg -> erlang:error(badarg, [Pids])
    end.

%% @doc A trace timestamp as local time: `HH:MM:SS.micro' for
%% `{Mega, Sec, Micro}'; other kinds as they are.
-spec time(term()) -> unicode:chardata().
time({Mega, Sec, Micro} = Ts) when is_integer(Mega), is_integer(Sec), is_integer(Micro),
                                   Micro >= 0, Micro < 1000000 ->
    try calendar:system_time_to_local_time(Mega * 1000000 + Sec, second) of
        {_, {H, M, S}} -> io_lib:format("~2..0w:~2..0w:~2..0w.~6..0w", [H, M, S, Micro])
    catch
        error:_ -> io_lib:format("~w", [Ts])     % out of the calendar's range
    end;
time(Ts) ->
    io_lib:format("~0P", [Ts, 10]).

%% Line in at most Max characters, ending in ... when it was cut.
cut(Line, Max) ->
    case string:length(Line) > Max of
        true when Max > length(?ELLIPSIS) ->
            [string:slice(Line, 0, Max - length(?ELLIPSIS)), ?ELLIPSIS];
        true ->
            lists:sublist(?ELLIPSIS, Max);
        false ->
            Line
    end.

%% @doc The line that ends a trace: how many events were shown, how many
%% dropped, and why the trace stopped.
-spec summary(#{reason := atom() | {atom(), term()}, shown := non_neg_integer(),
                dropped := non_neg_integer(), _ => _}) -> unicode:chardata().
summary(#{nodes := Nodes} = Summary) when not is_map(Nodes) ->
    erlang:error(badarg, [Summary]);
summary(#{nodes := Nodes} = Summary) ->
    Verb = case Summary of #{file := _} -> "written"; _ -> "shown" end,
    [summary(maps:remove(nodes, Summary)) |
     [io_lib:format("~ntracekit:   ~ts: ~0P ~s, ~0P dropped~ts",
                    [atom_to_list(N), S, 5, Verb, D, 5, node_state(State)])
      || {N, #{shown := S, dropped := D, state := State}} <- lists:sort(maps:to_list(Nodes))]];
summary(#{reason := Reason, shown := Written, dropped := Dropped, file := Path}) ->
    io_lib:format("tracekit: ~0P ~s written to ~ts, ~0P dropped; ~ts",
                  [Written, 5, plural(Written, "event", "events"), filename:flatten(Path),
                   Dropped, 5, reason(Reason)]);
summary(#{reason := Reason, shown := Shown, dropped := Dropped}) ->
    io_lib:format("tracekit: ~0P ~s shown, ~0P dropped; ~ts",
                  [Shown, 5, plural(Shown, "event", "events"), Dropped, 5, reason(Reason)]);
summary(Summary) ->
    erlang:error(badarg, [Summary]).

node_state(closed) -> "";
node_state({down, Why}) -> io_lib:format("; it went down (~0tP)", [Why, 5]);
node_state({not_fetched, Why}) -> io_lib:format("; its file was not fetched (~0tP)", [Why, 5]);
node_state(Other) -> io_lib:format("; ~0tP", [Other, 5]).

plural(1, One, _) -> One;
plural(_, _, Many) -> Many.

%% @doc Why a trace ended, as its summary line says it.
-spec reason(term()) -> iolist().
reason({max_events, N}) -> io_lib:format("stopped at the limit of ~w events", [N]);
reason({max_time, Ms}) -> io_lib:format("stopped at the time limit of ~w ms", [Ms]);
reason({rate, {N, Ms}}) ->
    io_lib:format("stopped: more than ~w events within ~w ms", [N, Ms]);
reason(stopped) -> "stopped by tracekit:stop";
reason(caller_down) -> "stopped: the process that started the trace exited";
reason(nodes_down) -> "stopped: every node traced went down";
reason({io_timeout, Ms}) ->
    io_lib:format("stopped: the io device did not print a line within ~w ms", [Ms]);
reason({format_timeout, Ms}) ->
    io_lib:format("stopped: the format fun did not return a line within ~w ms", [Ms]);
reason(R) -> io_lib:format("stopped: ~0tP", [R, 20]).

%% @equiv message_label(Msg, Max, #{})
-spec message_label(term(), pos_integer()) -> string().
message_label(Msg, Max) ->
    message_label(Msg, Max, #{}).

%% @doc A message as a diagram labels it, in at most `Max' characters:
%% gen_server requests and replies say what they are (`call {get,k}',
%% `cast stop', `reply 42'); other messages are shown as terms. A message
%% `{Tag, Reply}' is a reply when `Tag' is among `calls' (the tags of the
%% calls seen: `Tag => _'); without `calls', when `Tag' is an alias
%% (`[alias | Ref]', as gen_server replies are). The terms are printed
%% with the other options (records, reference tags).
-spec message_label(term(), pos_integer(), opts() | #{calls => map()}) -> string().
message_label(Msg, Max, Opts0) when is_integer(Max), Max >= 1, is_map(Opts0) ->
    Calls = maps:get(calls, Opts0, none),
    Opts = case maps:remove(calls, Opts0) of
               O when map_size(O) =:= 0 -> none;
               O -> opts(O, [Msg, Max, Opts0])
           end,
    Reply = case Msg of
                {Tag, _} when is_map(Calls) -> is_map_key(Tag, Calls);
                {[alias | Ref], _} when Calls =:= none -> is_reference(Ref);
                _ -> false
            end,
    Text = case Msg of
               {'$gen_call', {_, _}, Req} -> ["call ", short(Req, Max, Opts)];
               {'$gen_cast', Req} -> ["cast ", short(Req, Max, Opts)];
               {_, R} when Reply -> ["reply ", short(R, Max, Opts)];
               _ -> short(Msg, Max, Opts)
           end,
    unicode:characters_to_list(cut(unicode:characters_to_list(Text), Max));
message_label(Msg, Max, Opts) ->
    erlang:error(badarg, [Msg, Max, Opts]).

short(T, Max, none) ->
    short(T, Max);
short(T, Max, Opts) ->
    t(T, Opts#{depth => 8 + Max div 10, line_length => Max}).

short(T, Max) ->
    lists:flatten(io_lib:format("~0tP", [T, 8 + Max div 10])).
