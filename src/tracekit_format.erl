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
-module(tracekit_format).

-export([event/2, term/2, pid/2, names/1, time/1, summary/1, default_opts/0,
         message_label/2]).

-export_type([opts/0]).

%% `depth': how deep terms are printed (default 20); `line_length': the
%% most characters of a line (default 240); `names': registered names of
%% processes, shown beside their pids.
-type opts() :: #{depth => pos_integer(),
                  line_length => pos_integer(),
                  names => #{pid() | port() => atom()}}.

-define(ELLIPSIS, "...").
%% What the ring puts where it cut a term.
-define(CUT, '...').

%% @doc The defaults of the formatting options.
-spec default_opts() -> #{depth := pos_integer(), line_length := pos_integer(),
                          names := #{}}.
default_opts() ->
    #{depth => 20, line_length => 240, names => #{}}.

%% @doc Formats one event as one line (without a newline).
-spec event(term(), opts()) -> unicode:chardata().
event(Event, Opts0) ->
    Opts = opts(Opts0, [Event, Opts0]),
    {Ts, Body} = split(Event),
    Line = case Ts of
               none -> Body(Opts);
               _ -> [time(Ts), " ", Body(Opts)]
           end,
    cut(unicode:characters_to_list(Line), maps:get(line_length, Opts)).

%% The options with the defaults filled in; badarg (for the call with
%% Args) when one is not what it must be.
opts(Opts0, Args) when is_map(Opts0) ->
    case maps:merge(default_opts(), Opts0) of
        #{depth := D, line_length := L, names := N} = Opts
          when is_integer(D), D > 0, is_integer(L), L > 0, is_map(N) ->
            Opts;
        _ ->
            erlang:error(badarg, Args)
    end;
opts(_, Args) ->
    erlang:error(badarg, Args).

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
    {none, fun(O) -> term(E, O) end}.

body(_E, [trace, P, Tag | Rest]) when is_atom(Tag) ->
    fun(O) -> [pid(P, O), " ", what(Tag, Rest, O)] end;
body(E, _) ->
    fun(O) -> term(E, O) end.

what(call, [{M, F, Args} | Extra], O) ->
    [mfargs(M, F, Args, O), extra(Extra, O)];
what(return_from, [{M, F, A}, Val | Extra], O) ->
    [mfa(M, F, A), " -> ", term(Val, O), extra(Extra, O)];
what(exception_from, [{M, F, A}, {Class, Reason} | Extra], O) ->
    [mfa(M, F, A), " raised ", atom(Class), ":", term(Reason, O),
     extra(Extra, O)];
what(return_to, [{M, F, A} | Extra], O) ->
    ["returned to ", mfa(M, F, A), extra(Extra, O)];
what(return_to, [undefined | Extra], O) ->
    ["returned to an untraced function", extra(Extra, O)];
what(send, [Msg, To | Extra], O) ->
    ["! ", term(Msg, O), " -> ", dest(To, O), extra(Extra, O)];
what(send_to_non_existing_process, [Msg, To | Extra], O) ->
    ["! ", term(Msg, O), " -> ", dest(To, O), " (no such process)",
     extra(Extra, O)];
what('receive', [Msg | Extra], O) ->
    ["<< ", term(Msg, O), extra(Extra, O)];
what(spawn, [Child, {M, F, Args} | Extra], O) ->
    ["spawned ", pid(Child, O), " as ", mfargs(M, F, Args, O), extra(Extra, O)];
what(spawned, [Parent, {M, F, Args} | Extra], O) ->
    ["was spawned by ", pid(Parent, O), " as ", mfargs(M, F, Args, O),
     extra(Extra, O)];
what(exit, [Reason | Extra], O) ->
    ["exited: ", term(Reason, O), extra(Extra, O)];
what(link, [P | Extra], O) -> ["linked to ", pid(P, O), extra(Extra, O)];
what(unlink, [P | Extra], O) -> ["unlinked from ", pid(P, O), extra(Extra, O)];
what(getting_linked, [P | Extra], O) ->
    ["got linked by ", pid(P, O), extra(Extra, O)];
what(getting_unlinked, [P | Extra], O) ->
    ["got unlinked by ", pid(P, O), extra(Extra, O)];
what(register, [Name | Extra], O) ->
    ["registered as ", term(Name, O), extra(Extra, O)];
what(unregister, [Name | Extra], O) ->
    ["unregistered ", term(Name, O), extra(Extra, O)];
what(Tag, [{M, F, A} | Extra], O) when is_atom(M), is_atom(F), is_integer(A) ->
    [atom_to_list(Tag), " ", mfa(M, F, A), extra(Extra, O)];
what(Tag, Rest, O) ->
    [atom_to_list(Tag) | [[" ", term(X, O)] || X <- Rest]].

%% A match spec's {message, X} result (or a scheduler id) after the event.
extra([], _) -> [];
extra(Xs, O) -> [[" (", term(X, O), ")"] || X <- Xs].

seq(Label, Info) ->
    fun(O) -> ["seq_trace ", term(Label, O), ": ", seq_info(Info, O)] end.

seq_info({send, Serial, From, To, Msg}, O) ->
    [pid(From, O), " ! ", term(Msg, O), " -> ", dest(To, O), " ", serial(Serial)];
seq_info({'receive', Serial, From, To, Msg}, O) ->
    [pid(To, O), " << ", term(Msg, O), " from ", pid(From, O), " ", serial(Serial)];
seq_info({print, Serial, From, _, Info}, O) ->
    [pid(From, O), " print ", term(Info, O), " ", serial(Serial)];
seq_info(Info, O) ->
    term(Info, O).

serial({Last, Serial}) -> io_lib:format("[~w,~w]", [Last, Serial]);
serial(S) -> io_lib:format("[~tw]", [S]).

%% A call with its arguments. The arguments may have been cut by the ring
%% (`...' for all of them, or a list that ends in `...'), or be their
%% number.
mfargs(M, F, Args, O) when is_list(Args); Args =:= ?CUT ->
    [atom(M), ":", atom(F), "(", args(Args, "", O), ")"];
mfargs(M, F, Arity, _O) ->
    mfa(M, F, Arity).

args([], _Sep, _O) -> [];
args([A | As], Sep, O) -> [Sep, term(A, O) | args(As, ", ", O)];
args(?CUT, Sep, _O) -> [Sep, ?ELLIPSIS];
args(Tail, _Sep, O) -> [" | ", term(Tail, O)].

mfa(M, F, A) ->
    io_lib:format("~tw:~ts/~w", [M, atom(F), A]).

atom(A) -> io_lib:format("~tw", [A]).

%% Where a message was sent: a pid, a registered name or (a reference) an
%% alias.
dest(To, O) when is_reference(To) -> ["alias ", term(To, O)];
dest(To, O) -> pid(To, O).

%% @doc A term shortened to the depth and line length of the options.
-spec term(term(), opts()) -> unicode:chardata().
term(T, Opts0) ->
    #{depth := D, line_length := L} = opts(Opts0, [T, Opts0]),
    io_lib:format("~0tP", [T, D], [{chars_limit, L}]).

%% @doc A pid (or port) with its registered name when it has one.
-spec pid(term(), opts()) -> unicode:chardata().
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

reason({max_events, N}) -> io_lib:format("stopped at the limit of ~w events", [N]);
reason({max_time, Ms}) -> io_lib:format("stopped at the time limit of ~w ms", [Ms]);
reason({rate, {N, Ms}}) ->
    io_lib:format("stopped: more than ~w events within ~w ms", [N, Ms]);
reason(stopped) -> "stopped by tracekit:stop";
reason(caller_down) -> "stopped: the process that started the trace exited";
reason(nodes_down) -> "stopped: every node traced went down";
reason({io_timeout, Ms}) ->
    io_lib:format("stopped: the io device did not print a line within ~w ms", [Ms]);
reason(R) -> io_lib:format("stopped: ~0tP", [R, 20]).

%% @doc A message as a diagram labels it, in at most `Max' characters:
%% gen_server requests and replies say what they are (`call {get,k}',
%% `cast stop', `reply 42'); other messages are shown as terms.
-spec message_label(term(), pos_integer()) -> string().
message_label(Msg, Max) when not is_integer(Max); Max < 1 ->
    erlang:error(badarg, [Msg, Max]);
message_label(Msg, Max) ->
    Text = case Msg of
               {'$gen_call', {_, _}, Req} -> ["call ", short(Req, Max)];
               {'$gen_cast', Req} -> ["cast ", short(Req, Max)];
               {[alias | Ref], Reply} when is_reference(Ref) -> ["reply ", short(Reply, Max)];
               {Ref, Reply} when is_reference(Ref) -> ["reply ", short(Reply, Max)];
               _ -> short(Msg, Max)
           end,
    unicode:characters_to_list(cut(unicode:characters_to_list(Text), Max)).

short(T, Max) ->
    lists:flatten(io_lib:format("~0tP", [T, 8 + Max div 10])).
