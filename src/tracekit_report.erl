%% @doc An HTML report of trace events: one self-contained page (no
%% network, no script library) that a person opens in a browser.
%%
%% ```
%% 1> tracekit_report:write(Ring, "/tmp/report.html", #{title => "my_server under load"}).
%% {ok,#{events => 1834,rows => 1000,arrows => 212,...}}
%% 2> tracekit_report:write("/var/tmp/calls", "/tmp/calls.html").
%% '''
%%
%% The page has:
%% <ul>
%% <li>a summary: events, time span, processes (with how many events
%%   each), counts by tag, and the events lost or dropped when the caller
%%   says how many (`lost');</li>
%% <li>the sequence diagram of the messages, as inline SVG: a lifeline per
%%   process, an arrow per message from the send to the receive
%%   (gen_server calls and their replies labelled `call ...' and
%%   `reply ...'; a reply whose sender was not traced drawn from the
%%   process the call went to), a cross at the end of a message that a
%%   traced receiver never received or that went to no process, and the
%%   whole message and its seq_trace serial on hover; each label cut to
%%   the room between its lifelines;</li>
%% <li>a timeline per process (SVG): traced calls as nested bars, the
%%   time it was scheduled in beneath, on a compressed scale that keeps
%%   short calls visible beside long ones;</li>
%% <li>the event table: one row per event, its line as {@link
%%   tracekit_format:next/2} makes it (with `records' and `short_refs',
%%   as the CT hook's text file prints).</li>
%% </ul>
%% The diagram, the timeline and the table are capped (`max_arrows',
%% `max_slices', `max_rows'): the page says how many were left out, so a
%% huge trace gives a page of bounded size, read in one pass over a trace
%% file. Every text from the events is escaped: atoms, strings and
%% binaries in messages cannot inject markup. The page is well-formed XML
%% (XHTML syntax) as well as HTML.
-module(tracekit_report).

-export([write/2, write/3, html/2, arrows/2]).

-export_type([opts/0, info/0]).

%% `title': the page's title; `names': registered names of processes
%% (beside the `register' events of the trace); `lost': events lost or
%% dropped before the report (shown in the summary); `note': a line of
%% text shown under the title; `max_rows' (default 2000), `max_arrows'
%% (default 400), `max_slices' (default 5000): the caps; `depth',
%% `line_length', `records' (record definitions, {@link
%% tracekit_records:defs/1}), `short_refs' (references as short tags) and
%% `syntax' (`erlang' or `elixir'):
%% as in {@link tracekit_format} for the table, the labels and hovers
%% (the CT hook gives the report those of its text file); `latency':
%% functions' latency histograms (the `histograms' of a {@link
%% tracekit:latency/2} summary), shown in a Latency section (a table and a
%% log-scaled histogram per function, {@link tracekit_latency_svg}), with
%% `latency_opts' (`sort', `max').
-type opts() :: #{title => unicode:chardata(),
                  names => #{pid() | port() => atom()},
                  lost => non_neg_integer(),
                  note => unicode:chardata(),
                  max_rows => non_neg_integer(),
                  max_arrows => non_neg_integer(),
                  max_slices => non_neg_integer(),
                  depth => pos_integer(),
                  line_length => pos_integer(),
                  records => tracekit_records:defs(),
                  short_refs => boolean(),
                  syntax => erlang | elixir,
                  latency => tracekit_latency_view:functions(),
                  latency_opts => map()}.
%% What the page holds: events read, table rows, message arrows and
%% timeline slices drawn, and what was left out of each.
-type info() :: #{events := non_neg_integer(), rows := non_neg_integer(),
                  arrows := non_neg_integer(), slices := non_neg_integer(),
                  rows_left_out := non_neg_integer(),
                  arrows_left_out := non_neg_integer(),
                  slices_left_out := non_neg_integer()}.

-define(DEFAULTS, #{max_rows => 2000, max_arrows => 400, max_slices => 5000,
                    depth => 20, line_length => 240, names => #{}, lost => none,
                    title => "tracekit report", note => "", records => #{},
                    short_refs => false}).
-define(KEYS, [title, names, lost, note, max_rows, max_arrows, max_slices, depth,
               line_length, records, short_refs, syntax, latency, latency_opts]).
%% Sends looked at when a send of the other kind (process trace or
%% seq_trace) of the same message comes.
-define(MERGE_WINDOW, 32).
%% The diagram: the width of a character of its labels (11px monospace)
%% and the room kept on either side of a label, in pixels; the longest
%% label in characters; the bounds of a column's width.
-define(CHAR_W, 7).
-define(LABEL_PAD, 8).
-define(LABEL_MAX, 60).
-define(COL_MIN, 190).
-define(COL_MAX, 460).
%% The timeline: pixels per unit of its scale, and its widest.
-define(UNIT_PX, 12).
-define(TIMELINE_MIN, 900).
-define(TIMELINE_MAX, 24000).

%% One message arrow of the diagram.
-record(arrow, {id :: pos_integer(),
                from :: term(),
                to :: term(),
                msg :: term(),
                status = pending :: pending | received | no_process,
                kinds = [] :: [ptrace | seq],
                serial = none :: none | {term(), integer(), integer()},
                time :: integer()}).

-record(acc, {o :: map(),
              %% how an event becomes a row: the lines of tracekit_format
              stream :: tracekit_format:stream(),
              %% the tags of the gen_server calls drawn: Tag => their arrow
              calls = #{} :: #{term() => pos_integer()},
              n = 0 :: non_neg_integer(),
              clock = 0 :: integer(),
              timed = false :: boolean(),
              t0 = 0 :: integer(),
              first_ts = none :: term(),
              last_ts = none :: term(),
              tags = #{} :: #{atom() | string() => non_neg_integer()},
              procs = #{} :: #{term() => {pos_integer(), non_neg_integer()}},
              names = #{} :: #{term() => atom()},
              rows = [] :: [iodata()],
              rows_out = 0 :: non_neg_integer(),
              arrows = #{} :: #{pos_integer() => #arrow{}},
              narrows = 0 :: non_neg_integer(),
              arrows_out = 0 :: non_neg_integer(),
              recent = [] :: [pos_integer()],
              pend = #{} :: #{term() => [pos_integer()]},
              seqkeys = #{} :: #{term() => pos_integer()},
              receivers = #{} :: #{term() => true},
              stacks = #{} :: #{term() => [{binary(), integer()}]},
              running = #{} :: #{term() => integer()},
              last = #{} :: #{term() => integer()},
              slices = [] :: [{term(), call | run, binary(), integer(), integer(), non_neg_integer()}],
              nslices = 0 :: non_neg_integer(),
              slices_out = 0 :: non_neg_integer()}).

%%% ---- API --------------------------------------------------------------------

%% @equiv write(Source, File, #{})
-spec write(tracekit_export:source(), file:name_all()) ->
          {ok, info()} | {error, term()}.
write(Source, File) ->
    write(Source, File, #{}).

%% @doc Writes the report of the events of `Source' (a list of events, a
%% ring, which is drained, or trace files, as for
%% {@link tracekit_export:chrome/2}) to `File'. A trace file damaged part
%% way gives a report of the events before the damage, which says so.
-spec write(tracekit_export:source(), file:name_all(), opts()) ->
          {ok, info()} | {error, term()}.
write(Source, File, Opts) ->
    case html(Source, Opts) of
        {ok, Html, Info} ->
            case tracekit_private:write_file(File, Html) of
                ok -> {ok, Info};
                {error, Posix} -> {error, {file, File, Posix}}
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc The page, as UTF-8 bytes, and what it holds.
-spec html(tracekit_export:source(), opts()) ->
          {ok, binary(), info()} | {error, term()}.
html(Source, Opts0) when is_map(Opts0) ->
    case check(Opts0) of
        {ok, Opts} ->
            Stream = tracekit_format:stream(maps:with([depth, line_length, names, records,
                                                       short_refs, syntax], Opts)),
            Acc0 = #acc{o = Opts, names = maps:get(names, Opts), stream = Stream},
            case tracekit_export:fold_source(fun event/2, Acc0, Source) of
                {ok, Acc} -> page(Acc, none);
                {error, {bad_source, _} = Why, _} -> {error, Why};
                {error, Why, Acc} -> page(Acc, Why)
            end;
        Error ->
            Error
    end;
html(_Source, Opts) ->
    {error, {bad_option, Opts}}.

check(Opts0) ->
    case [K || K := _ <- Opts0, not lists:member(K, ?KEYS)] of
        [K | _] ->
            {error, {bad_option, {K, maps:get(K, Opts0)}}};
        [] ->
            Opts = maps:merge(?DEFAULTS, Opts0),
            Bad = [{K, V} || K := V <- Opts, not valid(K, V)],
            case Bad of
                [] -> {ok, Opts};
                [B | _] -> {error, {bad_option, B}}
            end
    end.

valid(K, V) when K =:= max_rows; K =:= max_arrows; K =:= max_slices ->
    is_integer(V) andalso V >= 0;
valid(K, V) when K =:= depth; K =:= line_length -> is_integer(V) andalso V > 0;
valid(lost, V) -> V =:= none orelse (is_integer(V) andalso V >= 0);
valid(names, V) -> is_map(V);
valid(records, V) -> is_map(V);
valid(short_refs, V) -> is_boolean(V);
valid(syntax, V) -> V =:= erlang orelse (V =:= elixir andalso tracekit_ex:loaded());
valid(latency, V) -> is_map(V);
valid(latency_opts, V) -> is_map(V);
valid(K, V) when K =:= title; K =:= note ->
    try unicode:characters_to_list(V) of
        L -> is_list(L)
    catch
        error:_ -> false
    end;
valid(_, _) -> false.

%%% ---- one pass over the events -----------------------------------------------

event(E, #acc{n = N} = A0) ->
    A1 = A0#acc{n = N + 1},
    {Time, A2} = clock(E, A1),
    Proc = process(E),
    Tag = tag(E),
    A3 = A2#acc{tags = maps:update_with(Tag, fun(C) -> C + 1 end, 1, A2#acc.tags)},
    A4 = case Proc of
             none -> A3;
             _ ->
                 Procs = A3#acc.procs,
                 P = case Procs of
                         #{Proc := {First, C}} -> {First, C + 1};
                         _ -> {map_size(Procs) + 1, 1}
                     end,
                 A3#acc{procs = Procs#{Proc => P}}
         end,
    A5 = register_name(E, A4),
    A6 = row(E, Time, A5),
    A7 = message(E, Time, A6),
    timeline(E, Proc, Time, A7).

clock(E, A) ->
    case ts(E) of
        none when not A#acc.timed ->
            {A#acc.clock, A#acc{clock = A#acc.clock + 1000}};
        none ->
            {A#acc.clock, A};
        {Ts, Ns} when not A#acc.timed ->
            T0 = Ns - A#acc.clock,
            {Ns - T0, A#acc{timed = true, t0 = T0, clock = Ns - T0,
                            first_ts = Ts, last_ts = Ts}};
        {Ts, Ns} ->
            {Ns - A#acc.t0, A#acc{clock = Ns - A#acc.t0, last_ts = Ts}}
    end.

ts(E) when element(1, E) =:= trace_ts, tuple_size(E) >= 5 -> ts_ns(element(tuple_size(E), E));
ts({seq_trace, _, _, Ts}) -> ts_ns(Ts);
ts(_) -> none.

ts_ns({M, S, U} = T) when is_integer(M), is_integer(S), is_integer(U) ->
    {T, (M * 1000000 + S) * 1000000000 + U * 1000};
ts_ns(Ns) when is_integer(Ns) -> {Ns, Ns};
ts_ns({Ns, U} = T) when is_integer(Ns), is_integer(U) -> {T, Ns};
ts_ns(_) -> none.

process(E) when (element(1, E) =:= trace orelse element(1, E) =:= trace_ts),
                tuple_size(E) >= 4 ->
    pid_or_none(element(2, E));
process({seq_trace, _, Info}) -> seq_process(Info);
process({seq_trace, _, Info, _}) -> seq_process(Info);
process(_) -> none.

seq_process({'receive', _, _, To, _}) -> pid_or_none(To);
seq_process({_, _, From, _, _}) -> pid_or_none(From);
seq_process(_) -> none.

pid_or_none(P) when is_pid(P); is_port(P) -> P;
pid_or_none(_) -> none.

tag(E) when (element(1, E) =:= trace orelse element(1, E) =:= trace_ts),
            tuple_size(E) >= 4, is_atom(element(3, E)) ->
    element(3, E);
tag({seq_trace, _, Info}) -> seq_tag(Info);
tag({seq_trace, _, Info, _}) -> seq_tag(Info);
tag(_) -> other.

seq_tag(Info) when is_tuple(Info), tuple_size(Info) > 0, is_atom(element(1, Info)) ->
    "seq_trace " ++ atom_to_list(element(1, Info));
seq_tag(_) -> "seq_trace".

register_name(E, A) when (element(1, E) =:= trace orelse element(1, E) =:= trace_ts),
                         tuple_size(E) >= 4, element(3, E) =:= register ->
    case element(4, E) of
        Name when is_atom(Name) ->
            Names = (A#acc.names)#{element(2, E) => Name},
            A#acc{names = Names,
                  stream = tracekit_format:stream_set(#{names => Names}, A#acc.stream)};
        _ ->
            A
    end;
register_name(_E, A) ->
    A.

%% The options terms and pids are printed with: the table's (with the
%% reference tags so far).
fopts(#acc{stream = Stream}) ->
    tracekit_format:stream_opts(Stream).

%% A table row (the event's line as tracekit_format makes it), or one more
%% left out.
row(E, Time, #acc{o = #{max_rows := Max}, n = N} = A) when N =< Max ->
    {Line, Stream} = tracekit_format:next(E, A#acc.stream),
    R = ["<tr><td class=\"n\">", integer_to_list(N), "</td><td class=\"t\">",
         tracekit_export:time_us(Time), "</td><td class=\"e\">", esc(Line), "</td></tr>\n"],
    A#acc{rows = [R | A#acc.rows], stream = Stream};
row(_E, _Time, A) ->
    A#acc{rows_out = A#acc.rows_out + 1}.

%%% ---- messages -----------------------------------------------------------------

%% @private
%% @doc The message arrows of `Events' as the page's sequence diagram
%% draws them, every one (no cap), in the order of their sends: `{From,
%% To, Msg, Kinds}', where `Kinds' says whether process tracing
%% (`ptrace'), seq_trace (`seq') or both saw the message. A send to a name
%% goes to the process registered under it (`Names', and register events);
%% a send to an alias or a name the process whose receive took it; a
%% receive whose send was not seen comes from the process a call went to
%% when it is that call's reply, else from `untraced'. The CT hook's
%% Mermaid diagrams are drawn from these.
-spec arrows([tuple()], #{pid() | port() => atom()}) ->
          [{term(), term(), term(), [ptrace | seq]}].
arrows(Events, Names) ->
    A0 = #acc{o = #{max_arrows => 1 bsl 60}, names = Names,
              stream = tracekit_format:stream(#{})},
    A = lists:foldl(fun(E, Acc) -> message(E, 0, register_name(E, Acc)) end, A0, Events),
    [{F, T, M, Ks} || {_, #arrow{from = F, to = T, msg = M, kinds = Ks}}
                          <- lists:keysort(1, maps:to_list(A#acc.arrows))].

message(E, Time, A) when (element(1, E) =:= trace orelse element(1, E) =:= trace_ts),
                         tuple_size(E) >= 5 ->
    case {element(3, E), element(2, E)} of
        {send, From} -> send(ptrace, From, element(5, E), element(4, E), none, Time, A);
        {send_to_non_existing_process, From} ->
            case new_arrow(From, element(5, E), element(4, E), Time, A) of
                {Id, A1} -> update(Id, fun(Ar) -> Ar#arrow{status = no_process,
                                                           kinds = [ptrace]} end, A1);
                full -> A
            end;
        {'receive', To} -> receive_msg(To, element(4, E), A#acc{receivers = (A#acc.receivers)#{To => true}}, Time);
        _ -> A
    end;
message(E, Time, A) when (element(1, E) =:= trace orelse element(1, E) =:= trace_ts),
                         tuple_size(E) =:= 4, element(3, E) =:= 'receive' ->
    receive_msg(element(2, E), element(4, E),
                A#acc{receivers = (A#acc.receivers)#{element(2, E) => true}}, Time);
message({seq_trace, L, Info}, Time, A) -> seq_message(L, Info, Time, A);
message({seq_trace, L, Info, _}, Time, A) -> seq_message(L, Info, Time, A);
message(_E, _Time, A) -> A.

seq_message(L, {send, {Last, Ser}, From, To, Msg}, Time, A) ->
    send(seq, From, To, Msg, {L, Last, Ser}, Time, A);
seq_message(L, {'receive', {Last, Ser}, From, To, _Msg}, _Time, A) ->
    case A#acc.seqkeys of
        #{{L, Last, Ser, From} := Id} ->
            update(Id, fun(#arrow{status = pending} = Ar) -> Ar#arrow{to = To, status = received};
                          (Ar) -> Ar
                       end, A#acc{seqkeys = maps:remove({L, Last, Ser, From}, A#acc.seqkeys)});
        _ ->
            A
    end;
seq_message(_L, _Info, _Time, A) ->
    A.

%% A send of one kind merges with a recent send of the other kind of the
%% same message from the same process; else it is a new arrow.
send(Kind, From, To, Msg, Serial, Time, A) ->
    Match = [Id || Id <- A#acc.recent,
                   #arrow{from = F, msg = M, kinds = Ks} <- [maps:get(Id, A#acc.arrows)],
                   F =:= From, M =:= Msg, not lists:member(Kind, Ks)],
    case Match of
        [Id | _] ->
            A1 = update(Id, fun(Ar) -> add_kind(Ar, Kind, Serial) end, A),
            pend_key(Kind, Msg, Id, seq_key(Serial, Id, A1));
        [] ->
            case new_arrow(From, To, Msg, Time, A) of
                {Id, A1} ->
                    A2 = update(Id, fun(Ar) -> add_kind(Ar, Kind, Serial) end, A1),
                    pend_key(Kind, Msg, Id, seq_key(Serial, Id, A2));
                full ->
                    A
            end
    end.

%% Process-trace sends wait for their receive by message.
pend_key(ptrace, Msg, Id, #acc{pend = P} = A) ->
    A#acc{pend = maps:update_with(Msg, fun(Ids) -> Ids ++ [Id] end, [Id], P)};
pend_key(seq, _Msg, _Id, A) ->
    A.

add_kind(Ar, Kind, none) -> Ar#arrow{kinds = [Kind | Ar#arrow.kinds]};
add_kind(Ar, Kind, Serial) -> Ar#arrow{kinds = [Kind | Ar#arrow.kinds], serial = Serial}.

seq_key(none, _Id, A) -> A;
seq_key({L, Last, Ser}, Id, #acc{arrows = Arrows} = A) ->
    From = (maps:get(Id, Arrows))#arrow.from,
    A#acc{seqkeys = (A#acc.seqkeys)#{{L, Last, Ser, From} => Id}}.

new_arrow(_From, _To, _Msg, _Time, #acc{narrows = N, o = #{max_arrows := Max}}) when N >= Max ->
    full;
new_arrow(From, To0, Msg, Time, #acc{narrows = N} = A) ->
    To = case To0 of
             _ when is_atom(To0) ->
                 case [P || P := Name <- A#acc.names, Name =:= To0] of
                     [P | _] -> P;
                     [] -> To0
                 end;
             _ -> To0
         end,
    Id = N + 1,
    Ar = #arrow{id = Id, from = From, to = To, msg = Msg, time = Time},
    Calls = case Msg of
                {'$gen_call', {_, Tag}, _} -> (A#acc.calls)#{Tag => Id};
                _ -> A#acc.calls
            end,
    {Id, A#acc{narrows = Id, arrows = (A#acc.arrows)#{Id => Ar}, calls = Calls,
               recent = lists:sublist([Id | A#acc.recent], ?MERGE_WINDOW)}}.

update(Id, Fun, #acc{arrows = Arrows} = A) ->
    A#acc{arrows = Arrows#{Id := Fun(maps:get(Id, Arrows))}}.

%% A receive takes the oldest pending arrow of that message to this
%% process (or to an alias or name it stands behind). A receive of a
%% message whose send was not seen is an arrow from the process a call
%% went to when it is that call's reply (`{Tag, Reply}', to an alias or to
%% `{Pid, Tag}'), else from `untraced'.
receive_msg(To, Msg, A, Time) ->
    Waiting = maps:get(Msg, A#acc.pend, []),
    Pending = [Id || Id <- Waiting,
                     #arrow{status = pending, to = T} <- [maps:get(Id, A#acc.arrows)],
                     T =:= To orelse not (is_pid(T) orelse is_port(T))],
    case Pending of
        [Id | _] ->
            Pend = case lists:delete(Id, Waiting) of
                       [] -> maps:remove(Msg, A#acc.pend);
                       Rest -> (A#acc.pend)#{Msg := Rest}
                   end,
            update(Id, fun(Ar) -> Ar#arrow{to = To, status = received} end, A#acc{pend = Pend});
        [] ->
            From = case Msg of
                       {Tag, _} when is_map_key(Tag, A#acc.calls) ->
                           (maps:get(maps:get(Tag, A#acc.calls), A#acc.arrows))#arrow.to;
                       _ ->
                           untraced
                   end,
            case new_arrow(From, To, Msg, Time, A) of
                {Id, A1} -> update(Id, fun(Ar) -> Ar#arrow{status = received,
                                                           kinds = [ptrace]} end, A1);
                full -> A#acc{arrows_out = A#acc.arrows_out + 1}
            end
    end.

%%% ---- timeline -------------------------------------------------------------------

timeline(E, Proc, Time, A) when Proc =/= none,
                                (element(1, E) =:= trace orelse element(1, E) =:= trace_ts),
                                tuple_size(E) >= 4 ->
    A1 = A#acc{last = (A#acc.last)#{Proc => Time}},
    Stack = maps:get(Proc, A1#acc.stacks, []),
    case {element(3, E), element(4, E)} of
        {call, {M, F, Args}} when is_atom(M), is_atom(F) ->
            Frame = {iolist_to_binary([tracekit_export:term_text(M, node()), ":",
                                       tracekit_export:term_text(F, node()), "/",
                                       arity(Args)]), Time},
            A1#acc{stacks = (A1#acc.stacks)#{Proc => [Frame | Stack]}};
        {Tag, {M, F, Ar}} when (Tag =:= return_from orelse Tag =:= exception_from
                                orelse Tag =:= return_to), is_atom(M), is_atom(F) ->
            Text = iolist_to_binary([tracekit_export:term_text(M, node()), ":",
                                     tracekit_export:term_text(F, node()), "/", arity2(Ar)]),
            case lists:splitwith(fun({T, _}) -> T =/= Text end, Stack) of
                {_, []} -> A1;
                {Above, [Top | Below]} ->
                    Closed = case Tag of return_to -> Above; _ -> Above ++ [Top] end,
                    Left = case Tag of return_to -> [Top | Below]; _ -> Below end,
                    A2 = close_frames(Proc, Closed, length(Left) + length(Closed), Time, A1),
                    A2#acc{stacks = (A2#acc.stacks)#{Proc => Left}}
            end;
        {exit, _} ->
            A2 = close_frames(Proc, Stack, length(Stack), Time, A1),
            A2#acc{stacks = (A2#acc.stacks)#{Proc => []}};
        {Tag, _} when Tag =:= in; Tag =:= in_exiting ->
            case A1#acc.running of
                #{Proc := _} -> A1;
                _ -> A1#acc{running = (A1#acc.running)#{Proc => Time}}
            end;
        {Tag, _} when Tag =:= out; Tag =:= out_exiting; Tag =:= out_exited ->
            case A1#acc.running of
                #{Proc := Start} ->
                    add_slice({Proc, run, <<"running">>, Start, Time, 0},
                              A1#acc{running = maps:remove(Proc, A1#acc.running)});
                _ -> A1
            end;
        _ ->
            A1
    end;
timeline(_E, none, _Time, A) ->
    A;
timeline(_E, Proc, Time, A) ->
    A#acc{last = (A#acc.last)#{Proc => Time}}.

arity(Args) when is_list(Args) ->
    try length(Args) of N -> integer_to_list(N) catch error:badarg -> "?" end;
arity(N) when is_integer(N) -> integer_to_list(N);
arity(_) -> "?".

arity2(N) when is_integer(N) -> integer_to_list(N);
arity2(_) -> "?".

%% Frames closed top first: the top is at depth Depth - 1.
close_frames(_Proc, [], _Depth, _Time, A) -> A;
close_frames(Proc, [{Name, Start} | Rest], Depth, Time, A) ->
    close_frames(Proc, Rest, Depth - 1, Time,
                 add_slice({Proc, call, Name, Start, Time, Depth - 1}, A)).

add_slice(S, #acc{nslices = N, o = #{max_slices := Max}} = A) when N < Max ->
    A#acc{slices = [S | A#acc.slices], nslices = N + 1};
add_slice(_S, A) ->
    A#acc{slices_out = A#acc.slices_out + 1}.

%% What is open at the end is closed at the process's last event.
close_open(A0) ->
    A1 = maps:fold(fun(Proc, Stack, A) ->
                           close_frames(Proc, Stack, length(Stack),
                                        maps:get(Proc, A#acc.last, 0), A)
                   end, A0, A0#acc.stacks),
    maps:fold(fun(Proc, Start, A) ->
                      add_slice({Proc, run, <<"running">>, Start,
                                 maps:get(Proc, A#acc.last, Start), 0}, A)
              end, A1#acc{stacks = #{}}, A1#acc.running).

%%% ---- the page -------------------------------------------------------------------

page(Acc0, ReadError) ->
    Acc = close_open(Acc0),
    #acc{o = O} = Acc,
    Arrows = [maps:get(I, Acc#acc.arrows) || I <- lists:seq(1, Acc#acc.narrows)],
    {Diagram, NArrows} = diagram(Arrows, Acc),
    Timeline = timeline_svg(Acc),
    Rows = lists:reverse(Acc#acc.rows),
    Title = unicode:characters_to_list(maps:get(title, O)),
    Html = ["<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
            "<meta charset=\"utf-8\"/>\n<title>", esc(Title), "</title>\n<style>", css(), "</style>\n"
            "</head>\n<body>\n<h1>", esc(Title), "</h1>\n",
            case unicode:characters_to_list(maps:get(note, O)) of
                "" -> [];
                Note -> ["<p class=\"note\">", esc(Note), "</p>\n"]
            end,
            case ReadError of
                none -> [];
                _ -> ["<p class=\"warn\">The trace could not be read to its end: ",
                      esc(io_lib:format("~0tP", [ReadError, 10])),
                      ". What was read before is shown.</p>\n"]
            end,
            summary(Acc),
            case O of
                #{latency := Lat} -> tracekit_latency_svg:section(Lat, maps:get(latency_opts, O, #{}));
                #{} -> []
            end,
            "<h2 id=\"messages\">Messages</h2>\n", Diagram,
            "<h2 id=\"timeline\">Timeline</h2>\n", Timeline,
            "<h2 id=\"events\">Events</h2>\n",
            "<table class=\"events\" id=\"event-table\">\n<thead><tr><th>#</th><th>time (&#181;s)</th>"
            "<th>event</th></tr></thead>\n<tbody>\n", Rows, "</tbody>\n</table>\n",
            left_out(Acc#acc.rows_out, "event", "events", "the table shows the first " ++
                         integer_to_list(maps:get(max_rows, O))),
            "</body>\n</html>\n"],
    Info = #{events => Acc#acc.n, rows => length(Rows), arrows => NArrows,
             slices => Acc#acc.nslices, rows_left_out => Acc#acc.rows_out,
             arrows_left_out => Acc#acc.arrows_out, slices_left_out => Acc#acc.slices_out},
    {ok, unicode:characters_to_binary(Html), Info}.

left_out(0, _, _, _) -> [];
left_out(N, One, Many, What) ->
    ["<p class=\"cap\">", integer_to_list(N), " more ", case N of 1 -> One; _ -> Many end,
     " left out (", esc(What), ").</p>\n"].

css() ->
    "body{font-family:sans-serif;margin:1em 2em;color:#222}"
    ".boxes{display:flex;gap:2.5em;align-items:flex-start;flex-wrap:wrap}.boxes h3{margin:0 0 .4em 0;font-size:1em}"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-size:0.85em}"
    "td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}"
    "table.events td.e{font-family:monospace;white-space:pre-wrap;word-break:break-all}"
    "td.n,td.t{font-family:monospace;text-align:right;white-space:nowrap}"
    ".summary td{font-family:monospace}.cap,.warn{color:#a40}.note{color:#555}"
    "svg text{font-family:monospace;font-size:11px}"
    ".lifeline{stroke:#999;stroke-dasharray:4 3}"
    ".msg{stroke:#1565c0;stroke-width:1.4;fill:none}.msg.lost{stroke:#c62828}"
    ".msg.unknown{stroke-dasharray:5 3}.cross{stroke:#c62828;stroke-width:2}"
    ".head rect{fill:#eef3fb;stroke:#1565c0}.row:hover .msg{stroke-width:3}"
    ".row text{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}"
    ".call{stroke:#fff;stroke-width:0.5}.run{fill:#3f6fb5}.axis{stroke:#bbb}"
    ".scroll{overflow-x:auto}".

summary(#acc{n = N, procs = Procs, tags = Tags, o = O, first_ts = T1, last_ts = T2} = A) ->
    FOpts = fopts(A),
    ProcRows = [["<tr><td>", esc(tracekit_format:pid(P, FOpts)), "</td><td>",
                 integer_to_list(C), "</td></tr>\n"]
                || {P, {_, C}} <- lists:sort(fun({_, {F1, _}}, {_, {F2, _}}) -> F1 =< F2 end,
                                             maps:to_list(Procs))],
    TagRows = [["<tr><td>", esc(tag_text(T)), "</td><td>", integer_to_list(C),
                "</td></tr>\n"] || {T, C} <- lists:sort(maps:to_list(Tags))],
    Span = case T1 of
               none -> "no timestamps";
               _ -> [tracekit_format:time(T1), " to ", tracekit_format:time(T2)]
           end,
    Lost = case maps:get(lost, O) of
               none -> [];
               L -> ["<tr><th>lost or dropped</th><td>", integer_to_list(L), "</td></tr>\n"]
           end,
    ["<h2 id=\"summary\">Summary</h2>\n<div class=\"boxes\">\n<div>\n<table class=\"summary\">\n",
     "<tr><th>events</th><td>", integer_to_list(N), "</td></tr>\n",
     Lost,
     "<tr><th>time</th><td>", esc(Span), "</td></tr>\n",
     "<tr><th>processes</th><td>", integer_to_list(map_size(Procs)), "</td></tr>\n",
     "<tr><th>messages drawn</th><td>", integer_to_list(A#acc.narrows), "</td></tr>\n",
     "</table>\n</div>\n",
     "<div>\n<h3>Processes</h3>\n<table class=\"procs\"><thead><tr><th>process</th><th>events</th></tr>"
     "</thead>\n<tbody>\n", ProcRows, "</tbody></table>\n</div>\n",
     "<div>\n<h3>Events by tag</h3>\n<table class=\"tags\"><thead><tr><th>tag</th><th>events</th></tr>"
     "</thead>\n<tbody>\n", TagRows, "</tbody></table>\n</div>\n</div>\n"].

tag_text(T) when is_atom(T) -> io_lib:format("~tw", [T]);
tag_text(T) -> T.

%% The sequence diagram: participants in the order they first take part.
%% The columns are as wide as the longest label needs (within bounds),
%% and each label is cut to the room between its arrow's lifelines.
diagram([], _A) ->
    {"<p>No messages were traced.</p>\n", 0};
diagram(Arrows0, A) ->
    Arrows = [finish_arrow(Ar, A) || Ar <- Arrows0],
    Parts = lists:foldl(fun({Ar, _}, Ps) -> add_part(Ar#arrow.to, add_part(Ar#arrow.from, Ps)) end,
                        [], Arrows),
    Order = maps:from_list(lists:zip(lists:reverse(Parts), lists:seq(0, length(Parts) - 1))),
    FOpts = fopts(A),
    LOpts = FOpts#{calls => A#acc.calls},
    Longest = lists:max([string:length(tracekit_format:message_label(Ar#arrow.msg, ?LABEL_MAX,
                                                                     LOpts))
                         || {Ar, _} <- Arrows]),
    Col = max(?COL_MIN, min(?COL_MAX, Longest * ?CHAR_W + 2 * ?LABEL_PAD)),
    Left = 110, Top = 50, RowH = 30,
    X = fun(P) -> Left + Col * maps:get(P, Order) end,
    W = Left + Col * length(Parts),
    H = Top + RowH * length(Arrows) + 30,
    Heads = [["<g class=\"head\"><rect x=\"", num(X(P) - 90), "\" y=\"4\" width=\"180\" height=\"26\" rx=\"3\"/>",
              "<text x=\"", num(X(P)), "\" y=\"21\" text-anchor=\"middle\">",
              esc(short(part_name(P, FOpts), 28)), "<title>", esc(part_name(P, FOpts)),
              "</title></text></g>\n",
              "<line class=\"lifeline\" x1=\"", num(X(P)), "\" y1=\"30\" x2=\"", num(X(P)),
              "\" y2=\"", num(H - 10), "\"/>\n"] || P <- lists:reverse(Parts)],
    Rows = [arrow_svg(Ar, Status, {X, Col}, Top + RowH * I, FOpts, LOpts)
            || {I, {Ar, Status}} <- lists:zip(lists:seq(1, length(Arrows)), Arrows)],
    Svg = ["<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"sequence\" width=\"", num(W),
           "\" height=\"", num(H), "\" viewBox=\"0 0 ", num(W), " ", num(H), "\">\n",
           "<defs><marker id=\"head\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" "
           "markerHeight=\"8\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#1565c0\"/></marker>"
           "</defs>\n", Heads, Rows, "</svg>\n"],
    {[Svg, left_out(A#acc.arrows_out, "message", "messages",
                    "the diagram shows the first " ++
                        integer_to_list(maps:get(max_arrows, A#acc.o)))],
     length(Arrows)}.

%% An arrow's drawn status: received, lost (a traced receiver never
%% received it, or no such process), or unknown (the receiver was not
%% traced for receives).
finish_arrow(#arrow{status = received} = Ar, _A) -> {Ar, received};
finish_arrow(#arrow{status = no_process} = Ar, _A) -> {Ar, lost};
finish_arrow(#arrow{to = To} = Ar, #acc{receivers = R}) ->
    case R of
        #{To := true} -> {Ar, lost};
        _ -> {Ar, unknown}
    end.

add_part(P, Ps) ->
    case lists:member(P, Ps) of
        true -> Ps;
        false -> [P | Ps]
    end.

part_name(untraced, _) -> "(untraced)";
part_name(P, FOpts) when is_pid(P); is_port(P) -> tracekit_format:pid(P, FOpts);
part_name(R, FOpts) when is_reference(R) -> ["alias ", tracekit_format:term(R, FOpts)];
part_name(T, FOpts) -> tracekit_format:term(T, FOpts).

arrow_svg(#arrow{from = F, to = T, msg = Msg, serial = Serial, id = Id}, Status, {X, Col}, Y,
          FOpts, LOpts) ->
    X1 = X(F), X2 = X(T),
    %% The room of the label: between the two lifelines, or (an arrow to
    %% itself) from the loop to the next lifeline.
    Room = case X1 =:= X2 of
               true -> Col - 36 - ?LABEL_PAD;
               false -> abs(X2 - X1) - 2 * ?LABEL_PAD
           end,
    Label = tracekit_format:message_label(Msg, max(1, min(?LABEL_MAX, Room div ?CHAR_W)), LOpts),
    Hover = [tracekit_format:term(Msg, FOpts),
             case Serial of
                 none -> [];
                 {L, Last, Ser} -> io_lib:format("\nseq_trace label ~ts, serial [~w,~w]",
                                                 [tracekit_format:term(L, FOpts), Last, Ser])
             end,
             case Status of
                 lost -> "\nnever received";
                 unknown -> "\nreceive not traced";
                 received -> []
             end],
    Class = case Status of
                received -> "msg";
                lost -> "msg lost";
                unknown -> "msg unknown"
            end,
    Line = case X1 =:= X2 of
               true ->
                   ["<path class=\"", Class, "\" d=\"M", num(X1), ",", num(Y - 6), "h30v12h-28\"",
                    marker(Status), "/>"];
               false ->
                   Dir = case X2 > X1 of true -> 1; false -> -1 end,
                   ["<line class=\"", Class, "\" x1=\"", num(X1), "\" y1=\"", num(Y), "\" x2=\"",
                    num(X2 - Dir * 2), "\" y2=\"", num(Y), "\"", marker(Status), "/>"]
           end,
    Cross = case Status of
                lost ->
                    CX = case X1 =:= X2 of true -> X1 + 2; false -> X2 end,
                    ["<line class=\"cross\" x1=\"", num(CX - 6), "\" y1=\"", num(Y - 6), "\" x2=\"",
                     num(CX + 6), "\" y2=\"", num(Y + 6), "\"/><line class=\"cross\" x1=\"",
                     num(CX - 6), "\" y1=\"", num(Y + 6), "\" x2=\"", num(CX + 6), "\" y2=\"",
                     num(Y - 6), "\"/>"];
                _ -> []
            end,
    TX = case X1 =:= X2 of true -> X1 + 36; false -> (X1 + X2) div 2 end,
    Anchor = case X1 =:= X2 of true -> "start"; false -> "middle" end,
    ["<g class=\"row\" id=\"m", integer_to_list(Id), "\"><title>", esc(Hover), "</title>", Line, Cross,
     "<text x=\"", num(TX), "\" y=\"", num(Y - 4), "\" text-anchor=\"", Anchor, "\">",
     esc(Label), "</text></g>\n"].

marker(lost) -> [];
marker(_) -> " marker-end=\"url(#head)\"".

num(N) -> integer_to_list(N).

short(Text, Max) ->
    S = unicode:characters_to_list(Text),
    case string:length(S) > Max of
        true -> string:slice(S, 0, Max - 3) ++ "...";
        false -> S
    end.

%% The timeline: a band per process with call slices nested by depth and
%% the running slices under them, on a compressed scale (scale/1).
timeline_svg(#acc{slices = []}) ->
    "<p>No calls or scheduling were traced.</p>\n";
timeline_svg(#acc{slices = Slices, procs = Procs} = A) ->
    {XOf, Width, Ticks} = scale(Slices),
    Left = 200, BarH = 14,
    InSlices = lists:usort([P || {P, _, _, _, _, _} <- Slices]),
    Ordered = lists:sort(fun(P1, P2) -> first(P1, Procs) =< first(P2, Procs) end, InSlices),
    ByProc = maps:groups_from_list(fun(S) -> element(1, S) end, Slices),
    FOpts = fopts(A),
    X = fun(T) -> Left + XOf(T) end,
    {Bands, H} =
        lists:foldl(
          fun(P, {Acc, Y}) ->
                  Mine = maps:get(P, ByProc),
                  Depth = lists:max([0 | [D + 1 || {_, call, _, _, _, D} <- Mine]]),
                  RunY = Y + Depth * BarH,
                  Band = ["<g class=\"proc\"><text x=\"4\" y=\"", num(Y + 11), "\">",
                          esc(short(tracekit_format:pid(P, FOpts), 26)), "</text>\n",
                          [slice_svg(S, Y, RunY, X, BarH) || S <- Mine],
                          "<line class=\"axis\" x1=\"", num(Left), "\" y1=\"", num(RunY + 8),
                          "\" x2=\"", num(Left + Width), "\" y2=\"", num(RunY + 8), "\"/></g>\n"],
                  {[Band | Acc], RunY + 16}
          end, {[], 24}, Ordered),
    T0 = element(1, hd(Ticks)),
    TickSvg = [["<text x=\"", num(X(T)), "\" y=\"14\" text-anchor=\"", Anchor, "\">",
                tracekit_export:time_us(T - T0), "</text>"]
               || {I, {T, _}} <- lists:enumerate(Ticks),
                  Anchor <- [case I of 1 -> "start"; _ -> "middle" end]],
    ["<p class=\"note\">Time in microseconds from the first slice, on a compressed scale: "
     "each stretch between two ends of slices takes room by the logarithm of its length, so "
     "that short calls stay visible beside long ones (the ticks say the times; hover a bar "
     "for its duration). Bars: traced calls (nested), and in blue beneath them the time the "
     "process was scheduled in (when scheduling was traced).</p>\n",
     "<div class=\"scroll\"><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" "
     "width=\"", num(Left + Width + 60), "\" height=\"", num(H + 10), "\">\n", TickSvg, "\n",
     lists:reverse(Bands), "</svg></div>\n",
     left_out(A#acc.slices_out, "slice", "slices", "the timeline shows the first " ++
                  integer_to_list(maps:get(max_slices, A#acc.o)))].

%% The compressed time axis of the slices: every time that starts or ends
%% a slice is a mark; the stretch between two marks t1 < t2 takes
%% log2(1 + (t2 - t1) in microseconds) units, ?UNIT_PX pixels each, the
%% whole scaled into the timeline's bounds. So a slice of a microsecond
%% takes a unit whatever else the trace holds, one of a second about 20.
%% Returns the x of a mark, the width, and the marks to label (one every
%% 100 pixels at most, from the first).
scale(Slices) ->
    Marks = lists:usort(lists:append([[S, E] || {_, _, _, S, E, _} <- Slices])),
    {Units, Total} = lists:mapfoldl(
                       fun({Prev, T}, Acc) ->
                               U = Acc + math:log2(1 + (T - Prev) / 1000),
                               {{T, U}, U}
                       end, 0.0, lists:zip([hd(Marks) | lists:droplast(Marks)], Marks)),
    Width = max(?TIMELINE_MIN, min(?TIMELINE_MAX, round(Total * ?UNIT_PX))),
    Px = maps:from_list([{T, round(U * Width / max(Total, 1.0e-9))} || {T, U} <- Units]),
    Ticks = lists:reverse(lists:foldl(fun({T, _}, []) -> [{T, maps:get(T, Px)}];
                                         ({T, _}, [{_, Last} | _] = Acc) ->
                                              case maps:get(T, Px) - Last >= 100 of
                                                  true -> [{T, maps:get(T, Px)} | Acc];
                                                  false -> Acc
                                              end
                                      end, [], Units)),
    {fun(T) -> maps:get(T, Px) end, Width, Ticks}.

first(P, Procs) ->
    case Procs of
        #{P := {F, _}} -> F;
        _ -> 0
    end.

slice_svg({_, Kind, Name, S, E, D}, Y, RunY, XOf, BarH) ->
    X = XOf(S),
    W = max(1, XOf(E) - X),
    {SY, Class, Fill} = case Kind of
                            call -> {Y + D * BarH, "call", color(Name)};
                            run -> {RunY + 2, "run", none}
                        end,
    Hh = case Kind of call -> BarH - 1; run -> 6 end,
    ["<rect class=\"", Class, "\" x=\"", num(X), "\" y=\"", num(SY), "\" width=\"", num(W),
     "\" height=\"", num(Hh), "\"",
     case Fill of none -> []; _ -> [" fill=\"", Fill, "\""] end,
     "><title>", esc([Name, " ", tracekit_export:time_us(E - S), " \x{b5}s"]), "</title></rect>",
     case Kind =:= call andalso W > 60 of
         true -> ["<text x=\"", num(X + 2), "\" y=\"", num(SY + 10), "\">",
                  esc(short(Name, max(1, W div 7))), "</text>"];
         false -> []
     end, "\n"].

color(Name) ->
    H = erlang:phash2(Name, 55),
    io_lib:format("hsl(~w,80%,~w%)", [H, 62 + erlang:phash2({Name}, 14)]).

esc(Text) -> tracekit_xml:esc(Text).
