%% @doc Sequential tracing for people: follow one flow of messages, put the
%% events in causal order, draw them.
%%
%% ```
%% 1> {pong, Events} = tracekit_seq:follow(fun() -> gen_server:call(my_server, ping) end).
%% 2> io:put_chars(tracekit_seq:diagram(Events, text)).
%%            <0.10.0>                      my_server
%%                |                             |
%%                |--{'$gen_call',{<0.10.0>...->|
%%                |<-{[alias|#Ref<0.0.1283....--|
%% 3> tracekit_seq:order(Events).
%% [#{kind => send,serial => {0,1},from => <0.10.0>,to => <0.90.0>,match => 2,...},
%%  #{kind => 'receive',serial => {0,1},...}, ...]
%% '''
%%
%% {@link follow/2} runs a function with a fresh seq_trace label and
%% collects the events of that label with a system seq tracer (a
%% `tracekit_ring', or OTP's process tracer), putting back whatever system
%% tracer and token were there. {@link order/1} puts events from one or
%% several nodes, in any order (logs merged offline), into causal order
%% using only their serials, and pairs each send with its receive.
%% {@link diagram/2} renders the ordered flow as a Mermaid
%% `sequenceDiagram' or as a plain-text chart.
-module(tracekit_seq).

-export([follow/1, follow/2, order/1, diagram/2]).
-export([seq_order/1]).
-export_type([event/0, step/0, follow_opts/0]).

-on_load(init/0).
-nifs([seq_order/1]).

%% What a system seq tracer gets: `{seq_trace, Label, Info}', or with a
%% timestamp `{seq_trace, Label, Info, Ts}'.
-type event() :: {seq_trace, term(), info()} | {seq_trace, term(), info(), term()}.
-type info() :: {send | 'receive', {integer(), integer()}, term(), term(), term()}
              | {print, {integer(), integer()}, term(), [], term()}.
%% One event in causal order. `match' is the position (1-based, in the
%% list order/1 returns) of the receive of a send, or of the send of a
%% receive, or `none'.
-type step() :: #{event := event(), kind := send | 'receive' | print,
                  label := term(), serial := {integer(), integer()},
                  from := term(), to := term(), msg := term(),
                  match := pos_integer() | none, ts => term()}.
%% `flags': the token flags (default `[send, 'receive', print]'); `label':
%% the label (default a fresh integer); `tracer': `ring' (default, a
%% tracekit_ring) or `process' (OTP's process tracer, a collecting
%% process); `settle': milliseconds to wait after Fun returns for the
%% other processes of the flow (default 50).
-type follow_opts() :: #{flags => [flag()], label => term(),
                         tracer => ring | process,
                         settle => non_neg_integer()}.
-type flag() :: send | 'receive' | print | timestamp | monotonic_timestamp
              | strict_monotonic_timestamp.

-define(FLAGS, [send, 'receive', print, timestamp, monotonic_timestamp,
                strict_monotonic_timestamp]).
-define(TEXT_WIDTH, 16).
-define(TEXT_MAX_WIDTH, 30).
-define(MSG_CHARS, 40).

%%% ---- follow ----------------------------------------------------------------

%% @equiv follow(Fun, #{})
-spec follow(fun(() -> Result)) -> {Result, [event()]}.
follow(Fun) ->
    follow(Fun, #{}).

%% @doc Runs `Fun' in the calling process with a seq_trace token of a fresh
%% label and the given flags, and returns its result with the seq_trace
%% events of that label: every message, spawn, exit signal and print that
%% the token reached, in the order the tracer stored them (see
%% {@link order/1} for causal order). The system seq tracer and the
%% caller's token in place before are put back, also when Fun raises
%% (which is then raised again). The flow's serials start from {0, 0};
%% afterwards the caller's counters are those of its old token, if it had
%% one.
%%
%% With the `ring' tracer, once the ring is full it refuses further events
%% and the VM then stops advancing the serials of the flow (a system seq
%% tracer that declines an event holds the serial back): a flow larger
%% than the ring shows its first events only.
-spec follow(fun(() -> Result), follow_opts()) -> {Result, [event()]}.
follow(Fun, Opts) when is_function(Fun, 0), is_map(Opts) ->
    Flags = maps:get(flags, Opts, [send, 'receive', print]),
    Label = maps:get(label, Opts, erlang:unique_integer([positive])),
    Settle = maps:get(settle, Opts, 50),
    Tracer = maps:get(tracer, Opts, ring),
    check_opts(Flags, Settle, Tracer, maps:keys(Opts)),
    %% Without a token while the tracer starts: a process spawned now
    %% would inherit it.
    OldToken = seq_trace:set_token([]),
    {TracerTerm, Collect, Close} = start_tracer(Tracer),
    Recorded = recorded_label(TracerTerm, Label, Flags),
    OldTracer = seq_trace:set_system_tracer(TracerTerm),
    try
        _ = seq_trace:set_token(label, Label),
        _ = seq_trace:set_token(serial, {0, 0}),
        lists:foreach(fun(F) -> _ = seq_trace:set_token(F, true) end, Flags),
        Result = Fun(),
        _ = seq_trace:set_token([]),
        timer:sleep(Settle),
        {Result, [E || E <- Collect(), element(2, E) =:= Recorded]}
    after
        _ = seq_trace:set_token([]),
        _ = seq_trace:set_system_tracer(OldTracer),
        Close(),
        _ = OldToken =:= [] orelse seq_trace:set_token(OldToken)
    end;
follow(Fun, Opts) ->
    error(badarg, [Fun, Opts]).

check_opts(Flags, Settle, Tracer, Keys) ->
    Known = [flags, label, settle, tracer],
    case [K || K <- Keys, not lists:member(K, Known)] of
        [] -> ok;
        Bad -> error({badarg, {unknown_options, Bad}})
    end,
    is_list(Flags) andalso lists:all(fun(F) -> lists:member(F, ?FLAGS) end, Flags)
        orelse error({badarg, {flags, Flags}}),
    is_integer(Settle) andalso Settle >= 0
        orelse error({badarg, {settle, Settle}}),
    lists:member(Tracer, [ring, process])
        orelse error({badarg, {tracer, Tracer}}).

%% The label as the tracer hands it back: a ring cuts a label too large or
%% too deep for a record (with the marker '...', as every term), so the
%% events of the flow carry that cut label. A probe event through the same
%% ring, with the same timestamp kind, shows it; it is drained at once.
recorded_label({tracekit_ring, R}, Label, Flags) ->
    Opts = case [F || F <- [timestamp, strict_monotonic_timestamp,
                            monotonic_timestamp], lists:member(F, Flags)] of
               [] -> #{};
               [Ts | _] -> #{timestamp => ts_kind(Ts)}
           end,
    ok = tracekit_ring:trace(seq_trace, R, Label,
                             {print, {0, 0}, self(), [], probe}, Opts),
    [Probe] = tracekit_ring:drain(R),
    element(2, Probe);
recorded_label(_ProcessTracer, Label, _Flags) ->
    Label.

ts_kind(timestamp) -> timestamp;
ts_kind(strict_monotonic_timestamp) -> strict_monotonic;
ts_kind(monotonic_timestamp) -> monotonic.

%% {TracerTerm, Collect, Close}: a system seq tracer, a function returning
%% what it got so far, and one taking it down.
start_tracer(ring) ->
    {ok, R} = tracekit_ring:new(#{}),
    {{tracekit_ring, R}, fun() -> tracekit_ring:drain(R) end,
     fun() -> tracekit_ring:close(R) end};
start_tracer(process) ->
    Pid = spawn(fun() -> collect([]) end),
    {Pid,
     fun() ->
             Ref = monitor(process, Pid),
             Pid ! {'$tracekit_seq_get', self(), Ref},
             receive
                 {Ref, Events} -> demonitor(Ref, [flush]), Events;
                 {'DOWN', Ref, process, Pid, _} -> []
             end
     end,
     fun() -> exit(Pid, kill), ok end}.

collect(Acc) ->
    receive
        {'$tracekit_seq_get', From, Ref} ->
            From ! {Ref, lists:reverse(Acc)},
            collect(Acc);
        Event when element(1, Event) =:= seq_trace ->
            collect([Event | Acc]);
        _ ->
            collect(Acc)
    end.

%%% ---- order -------------------------------------------------------------

%% @doc Puts seq_trace events into causal order and pairs each send with
%% its receive. The events may come from several nodes' system tracers and
%% in any order; only their labels, serials, senders, receivers and
%% messages are used (c_src/lib/tk_seqorder.h has the rules). Events of
%% different processes that the tokens do not order come by increasing
%% serial. Raises `badarg' if an element is not a seq_trace event.
-spec order([event()]) -> [step()].
order(Events) when is_list(Events) ->
    Parsed = [parse(E) || E <- Events],
    {Input, _} = lists:mapfoldl(fun intern/2, {#{}, 0}, Parsed),
    Order = seq_order(Input),
    Steps = list_to_tuple(Parsed),
    Pos = maps:from_list([{I, N} || {N, {I, _}} <- enumerate(Order)]),
    [Step#{match => case M of
                        -1 -> none;
                        _ -> maps:get(M, Pos)
                    end}
     || {I, M} <- Order, Step <- [element(I + 1, Steps)]];
order(Events) ->
    error(badarg, [Events]).

enumerate(L) ->
    lists:zip(lists:seq(1, length(L)), L).

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

%% @private
%% @doc The NIF under {@link order/1}: the causal order of seq_trace events
%% given as interned numbers, `{Kind, Label, LastCnt, Serial, From, To,
%% Msg, SpawnReply}' (`To' is -1 for a print). Returns the input positions
%% (0-based) in causal order, each with the position of the event matched
%% with it (a send's receive, a receive's send) or -1. The rules are in
%% c_src/lib/tk_seqorder.h; its C is in c_src/nif/tracekit_seq.
-spec seq_order([{send | 'receive' | print, non_neg_integer(), integer(),
                  integer(), non_neg_integer(), integer(), non_neg_integer(),
                  boolean()}]) -> [{non_neg_integer(), integer()}].
seq_order(_Events) ->
    erlang:nif_error(not_loaded).

parse({seq_trace, Label, Info} = E) ->
    parse_info(E, Label, Info, #{});
parse({seq_trace, Label, Info, Ts} = E) ->
    parse_info(E, Label, Info, #{ts => Ts});
parse(E) ->
    error({badarg, {not_a_seq_trace_event, E}}).

parse_info(E, Label, {Kind, {LastCnt, Serial}, From, To, Msg}, Extra)
  when (Kind =:= send orelse Kind =:= 'receive' orelse Kind =:= print),
       is_integer(LastCnt), is_integer(Serial) ->
    Extra#{event => E, kind => Kind, label => Label,
           serial => {LastCnt, Serial}, from => From, to => To, msg => Msg};
parse_info(E, _, _, _) ->
    error({badarg, {not_a_seq_trace_event, E}}).

%% Terms become numbers for the C core: equal terms, equal numbers.
intern(#{kind := Kind, label := Label, serial := {LastCnt, Serial},
         from := From, to := To, msg := Msg}, {Map0, N0}) ->
    {L, Map1, N1} = number({label, Label}, Map0, N0),
    {F, Map2, N2} = number({entity, From}, Map1, N1),
    {T, Map3, N3} = case Kind of
                        print -> {-1, Map2, N2};
                        _ -> number({entity, To}, Map2, N2)
                    end,
    {M, Map4, N4} = number({msg, Msg}, Map3, N3),
    SpawnReply = Kind =:= 'receive' andalso is_spawn_reply(Msg),
    {{Kind, L, LastCnt, Serial, F, T, M, SpawnReply}, {Map4, N4}}.

number(Key, Map, N) ->
    case Map of
        #{Key := V} -> {V, Map, N};
        _ -> {N, Map#{Key => N}, N + 1}
    end.

%% The VM's spawn_reply message, or the model's rendering of it.
is_spawn_reply({spawn_reply, _Ref, _Result, _Pid}) -> true;
is_spawn_reply({spawn_reply, _Pid}) -> true;
is_spawn_reply(_) -> false.

%%% ---- diagram -----------------------------------------------------------

%% @doc Renders seq_trace events (in any order: they are put in causal
%% order first) or the steps {@link order/1} returned, as a Mermaid
%% `sequenceDiagram' or a plain-text chart. Each transfer is one arrow, at
%% its send (or its receive when the send is missing); a send nobody
%% received ends in a cross; prints are notes. Processes are named by
%% the name they are registered under now, if any (`Name@NodeName' for a
%% process of another node), else by their pid; other senders and
%% receivers (node names, `{Name, Node}') as they print. Messages are
%% shortened to one line of at most 40 characters (and, in the text chart,
%% to the room between two lifelines).
-spec diagram([event()] | [step()], mermaid | text) -> iolist().
diagram(Events, Format) when is_list(Events),
                             (Format =:= mermaid orelse Format =:= text) ->
    Steps = case Events of
                [#{event := _} | _] -> Events;
                _ -> order(Events)
            end,
    Items = items(Steps),
    Parts = participants(Items),
    Names = names(Parts),
    case Format of
        mermaid -> mermaid(Items, Parts, Names);
        text -> text(Items, Parts, Names)
    end;
diagram(Events, Format) ->
    error(badarg, [Events, Format]).

%% {arrow, From, To, Text, Received} | {note, Who, Text}, in order. A
%% received message goes to the receiver its receive names: a send to a
%% registered name on another node names `{Name, Node}', the receive the
%% pid.
items(Steps) ->
    ByPos = list_to_tuple(Steps),
    lists:filtermap(
      fun(#{kind := print, from := From, msg := Info}) ->
              {true, {note, From, short(Info)}};
         (#{kind := send, from := From, to := To, msg := Msg,
            match := none}) ->
              {true, {arrow, From, To, msg_text(Msg), false}};
         (#{kind := send, from := From, msg := Msg, match := Match}) ->
              #{to := To} = element(Match, ByPos),
              {true, {arrow, From, To, msg_text(Msg), true}};
         (#{kind := 'receive', from := From, to := To, msg := Msg,
            match := none}) ->
              {true, {arrow, From, To, msg_text(Msg), true}};
         (_) ->
              false
      end, Steps).

msg_text(Msg) when is_tuple(Msg), tuple_size(Msg) > 0,
                   element(1, Msg) =:= spawn_request ->
    "spawn_request";
msg_text(Msg) when is_tuple(Msg), tuple_size(Msg) > 0,
                   element(1, Msg) =:= spawn_reply ->
    "spawn_reply";
msg_text(Msg) ->
    tracekit_format:message_label(Msg, ?MSG_CHARS).

%% One line, at most ?MSG_CHARS characters.
short(Term) ->
    S = lists:flatten(io_lib:format("~0tp", [Term])),
    case string:length(S) > ?MSG_CHARS of
        true -> string:slice(S, 0, ?MSG_CHARS - 3) ++ "...";
        false -> S
    end.

participants(Items) ->
    lists:foldl(fun(Who, Acc) ->
                        case lists:member(Who, Acc) of
                            true -> Acc;
                            false -> Acc ++ [Who]
                        end
                end, [],
                lists:append([case I of
                                  {arrow, F, T, _, _} -> [F, T];
                                  {note, W, _} -> [W]
                              end || I <- Items])).

names(Parts) ->
    maps:from_list([{P, name(P)} || P <- Parts]).

name(Pid) when is_pid(Pid) ->
    case registered_name(Pid) of
        {ok, Name} when node(Pid) =:= node() -> atom_to_list(Name);
        {ok, Name} ->
            [NodeName | _] = string:split(atom_to_list(node(Pid)), "@"),
            atom_to_list(Name) ++ "@" ++ NodeName;
        none -> pid_to_list(Pid)
    end;
name(Other) ->
    lists:flatten(io_lib:format("~0tp", [Other])).

registered_name(Pid) when node(Pid) =:= node() ->
    case process_info(Pid, registered_name) of
        {registered_name, Name} -> {ok, Name};
        _ -> none
    end;
registered_name(Pid) ->
    try erpc:call(node(Pid), erlang, process_info, [Pid, registered_name],
                  1000) of
        {registered_name, Name} -> {ok, Name};
        _ -> none
    catch
        _:_ -> none
    end.

%% ---- Mermaid ----

mermaid(Items, _Parts, Names) ->
    tracekit_mermaid:sequence(
      [case I of
           {arrow, F, T, Text, true} -> {F, T, Text};
           {arrow, F, T, Text, false} -> {F, T, Text, lost};
           {note, W, Text} -> {note, W, Text}
       end || I <- Items],
      #{names => Names}).

%% ---- text ----

%% Lifelines ?TEXT_WIDTH columns apart; arrows between them carry the
%% message, cut to the room they have.
text(Items, Parts, Names) ->
    %% Room for the longest message (up to a limit) and every name.
    Longest = lists:max([0 | [string:length(T) || {arrow, _, _, T, _} <- Items]]),
    Width = lists:max([?TEXT_WIDTH, min(?TEXT_MAX_WIDTH, Longest + 6)
                       | [string:length(N) + 2 || N <- maps:values(Names)]]),
    Cols = maps:from_list([{P, (N - 1) * Width + Width div 2}
                           || {N, P} <- enumerate(Parts)]),
    LineLen = length(Parts) * Width,
    Header = lists:foldl(
               fun(P, Line) ->
                       Name = maps:get(P, Names),
                       Start = max(0, maps:get(P, Cols) - string:length(Name) div 2),
                       put_at(Line, Start, Name)
               end, blank(LineLen), Parts),
    Life = lifelines(LineLen, Cols),
    Rows = [row(I, Life, Cols, Width) || I <- Items],
    [[trim(L), "\n"] || L <- [Header, Life | Rows]].

blank(N) -> lists:duplicate(N, $\s).

lifelines(Len, Cols) ->
    lists:foldl(fun(X, L) -> put_at(L, X, "|") end, blank(Len),
                maps:values(Cols)).

row({note, W, Text}, Life, Cols, Width) ->
    X = maps:get(W, Cols),
    Room = Width - 3,
    put_at(put_at(Life, X, "*"), X + 2, cut(Text, Room));
row({arrow, F, T, Text, Received}, Life, Cols, Width) when F =:= T ->
    X = maps:get(F, Cols),
    Head = case Received of true -> "<-'"; false -> "x-'" end,
    put_at(Life, X + 1, Head ++ cut(Text, Width - 5));
row({arrow, F, T, Text, Received}, Life, Cols, _Width) ->
    A = maps:get(F, Cols),
    B = maps:get(T, Cols),
    {Lo, Hi} = {min(A, B), max(A, B)},
    Shaft = lists:duplicate(Hi - Lo - 1, $-),
    Tip = case Received of true -> ">"; false -> "x" end,
    Arrow = case A < B of
                true -> lists:sublist(Shaft, length(Shaft) - 1) ++ Tip;
                false -> (case Received of true -> "<"; false -> "x" end)
                             ++ tl(Shaft)
            end,
    Label = cut(Text, Hi - Lo - 5),
    Line = put_at(Life, Lo + 1, Arrow),
    put_at(Line, Lo + 3, Label).

cut(_Text, Room) when Room < 1 -> "";
cut(Text, Room) ->
    case string:length(Text) > Room of
        true when Room > 3 -> string:slice(Text, 0, Room - 3) ++ "...";
        true -> string:slice(Text, 0, Room);
        false -> Text
    end.

%% Writes String over Line starting at column X (Line grows if needed).
put_at(Line, X, String) ->
    S = unicode:characters_to_list(String),
    Len = length(Line),
    Padded = case X + length(S) > Len of
                 true -> Line ++ blank(X + length(S) - Len);
                 false -> Line
             end,
    lists:sublist(Padded, X) ++ S ++ lists:nthtail(X + length(S), Padded).

trim(Line) ->
    string:trim(Line, trailing, " ").
