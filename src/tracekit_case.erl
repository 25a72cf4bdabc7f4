%% @private
%% @doc A recorded test case, for the Common Test hook ({@link
%% tracekit_cth}) and the ExUnit recorder ({@link tracekit_exunit}): the
%% recording (a trace of {@link tracekit_trace} that keeps the last events
%% of the case in overwrite rings and goes on when the test's process
%% dies), and the files written when the case fails: the text of the case
%% body, the HTML report and the Mermaid diagrams.
-module(tracekit_case).

-export([record/2, recorded/1, start_names/1, seq_token/1, nodes_opts/1, write/3]).

%% @doc Starts the recording of a case: a trace (tracekit_trace, as the
%% shell's) that keeps the last `events' events in overwrite rings, goes
%% on when the test case process is killed, and also records the calls,
%% returns and exceptions of the case function (Mark) in the test case
%% process with its process events, to find where the case body begins
%% and ends.
-spec record(map(), mfa()) -> nothing | {ok, pid()} | {error, term()}.
record(#{calls := Calls, messages := M, procs := P, seq_trace := Seq} = Opts, Mark) ->
    case Calls =:= [] andalso not M andalso not P andalso not Seq of
        true ->
            nothing;
        false ->
            maybe
                {ok, Resolved} ?= case Calls of
                                      [] -> {ok, []};
                                      _ -> tracekit_spec:resolve(Calls)
                                  end,
                Procs = lists:usort([Pid || X <- maps:get(processes, Opts), Pid <- [proc(X, Opts)],
                                            is_pid(Pid), is_process_alive(Pid)]),
                Flags = [send || M] ++ ['receive' || M] ++ [procs || P],
                Plan = #{procs => [{Procs, [timestamp | Flags]} || Flags =/= [], Procs =/= []]
                             ++ [{all, [call, timestamp]} || Resolved =/= []]
                             ++ [{[test_pid(Opts)], [call, procs, timestamp]}],
                         calls => [{MFA, MS, local} || {#{match_spec := MS}, MFAs} <- Resolved,
                                                       MFA <- MFAs]
                             ++ [{Mark, [{'_', [], [{exception_trace}]}], local}],
                         seq_trace => Seq},
                Trace = #{print => false, watch => maps:get(watch, Opts, false), keep => {last, maps:get(events, Opts)},
                          max_events => infinity, max_time => infinity, rate => none,
                          ring_size => maps:get(ring_size, Opts), payload => full,
                          policy => overwrite},
                tracekit_trace:start(Plan, maps:merge(Trace, nodes_opts(Opts)))
            end
    end.

%% @doc With `nodes': every node named (those that cannot take part are left
%% out, and said so), or with `all' every node connected now or later.
nodes_opts(#{nodes := all}) ->
    #{nodes => all, follow => true, bad_node => skip};
nodes_opts(#{nodes := Nodes}) ->
    #{nodes => lists:usort([node() | Nodes]), bad_node => skip};
nodes_opts(_) ->
    #{}.

%% @doc What a recording gives back: the events kept (oldest first), how many
%% were lost (overwritten, dropped, or given way), and with `nodes' the
%% nodes recorded on and those left out with the reason.
-spec recorded(tracekit_trace:summary()) -> map().
recorded(#{events := Events, dropped := Lost} = Summary) ->
    case Summary of
        #{nodes := Nodes} ->
            #{events => Events, lost => Lost,
              nodes => lists:sort([N || N := #{state := S} <- Nodes, not is_failed(S)]),
              failed => lists:sort([{N, Why} || N := #{state := {failed, Why}} <- Nodes])};
        _ ->
            #{events => Events, lost => Lost}
    end.

is_failed({failed, _}) -> true;
is_failed(_) -> false.

%% @doc Names of the processes to trace, as they are when the case starts
%% (they may be gone when the trace is written); the test case process
%% is `testcase' (`test' in ExUnit).
-spec start_names(map()) -> #{pid() => atom()}.
start_names(#{processes := Ps} = Opts) ->
    Self = self_name(Opts),
    maps:from_list([{test_pid(Opts), Self}
                    | [{Pid, Name} || Name <- Ps, is_atom(Name), Name =/= Self,
                                      Pid <- [whereis(Name)], is_pid(Pid)]]).

%% The name of the test's own process among `processes' (and in the
%% lines): `testcase' in Common Test, `test' in ExUnit.
self_name(Opts) ->
    maps:get(self_name, Opts, testcase).

%% The test's process: the caller's, or `test_pid' when another process
%% starts the recording (which then ends when that process does, with
%% `watch' true).
test_pid(Opts) ->
    maps:get(test_pid, Opts, self()).

proc(X, Opts) ->
    case self_name(Opts) of
        X -> test_pid(Opts);
        _ when is_pid(X) -> X;
        _ when is_atom(X) -> whereis(X);
        _ -> undefined
    end.

%% @doc Puts a seq_trace token of a new label on the calling process
%% when `seq_trace' is on.
-spec seq_token(map()) -> ok.
seq_token(#{seq_trace := true}) ->
    _ = seq_trace:set_token(label, erlang:unique_integer([positive]) band 16#FFFFFF),
    _ = [seq_trace:set_token(F, true) || F <- [send, 'receive', timestamp]],
    ok;
seq_token(_) ->
    ok.


%%% Writing -------------------------------------------------------------------


%% With `nodes', each line begins with its event's node.
node_prefix(E, #{nodes := _}) -> [atom_to_list(event_node(E)), " "];
node_prefix(_, _) -> "".

%% The node where an event happened: its process's, or for a seq_trace
%% event the sender's (send, print) or the receiver's.
event_node({seq_trace, _, Info}) -> info_node(Info);
event_node({seq_trace, _, Info, _}) -> info_node(Info);
event_node(E) when tuple_size(E) >= 2 ->
    case element(2, E) of
        P when is_pid(P); is_port(P) -> node(P);
        _ -> node()
    end.

info_node({'receive', _, _, To, _}) when is_pid(To) -> node(To);
info_node({_, _, From, _, _}) when is_pid(From) -> node(From);
info_node(_) -> node().

nodes_line(#{nodes := Nodes} = Rec) ->
    io_lib:format("recorded on ~ts~ts~n",
                  [lists:join(", ", [atom_to_list(N) || N <- Nodes]),
                   [io_lib:format("; not on ~ts (~0tP)", [atom_to_list(N), Why, 8])
                    || {N, Why} <- maps:get(failed, Rec, [])]]);
nodes_line(_) ->
    "".

%% @doc Writes the files of a recorded case: `Base.txt' (one line per
%% event of the case body), `Base.html' (the report) and, with `messages'
%% or `seq_trace', `Base.messages.mmd' and `Base.seq.mmd'. Rec: what
%% {@link recorded/1} gives and `opts', `tc_pid', `mark', `names',
%% `title' (what the header names), `records' (a module whose records
%% print too). Returns how many events the files hold, the files with
%% their descriptions, and the problems met writing those that are not
%% among them.
-spec write(string(), map(), atom()) ->
          {non_neg_integer(), [{string(), string()}], [{string(), term()}]}.
write(Base, #{events := All, lost := Lost, opts := Opts, tc_pid := TcPid, mark := Mark,
              names := StartNames, title := Title} = Rec, Outcome) ->
    Self = self_name(Opts),
    Events = body(All, TcPid, Mark, maps:get(procs, Opts)
                                     andalso lists:member(Self, maps:get(processes, Opts))),
    Names = maps:merge(tracekit_format:names(pids(Events)), StartNames),
    FOpts = maps:merge(#{depth => maps:get(depth, Opts), line_length => maps:get(line_length, Opts),
                         names => Names},
                       maps:with([syntax], Opts)),
    What = case Self of testcase -> "test case"; _ -> atom_to_list(Self) end,
    Header = io_lib:format("tracekit trace of ~ts (~w): ~w events of the ~ts "
                           "body (~w earlier events lost)~n~ts",
                           [Title, Outcome, length(Events), What, Lost, nodes_line(Rec)]),
    TextOpts = text_opts(maps:get(records, Rec, []), Events, Opts, FOpts),
    Lines = [[node_prefix(E, Opts), Line, $\n]
             || {E, Line} <- tracekit_format:events(Events, TextOpts)],
    ok = tracekit_private:write_file(Base ++ ".txt",
                                     unicode:characters_to_binary([Header, Lines,
                                                                   slowest_text(Rec)])),
    Arrows = case maps:get(messages, Opts) orelse maps:get(seq_trace, Opts) of
                 true -> tracekit_report:arrows(Events, Names);
                 false -> []
             end,
    Diagrams = [diagram(Base ++ ".messages.mmd", "messages",
                        arrows_seen_by(ptrace, Arrows, FOpts), Names, FOpts)
                || maps:get(messages, Opts)]
        ++ [diagram(Base ++ ".seq.mmd", "seq_trace", arrows_seen_by(seq, Arrows, FOpts), Names, FOpts)
            || maps:get(seq_trace, Opts)],
    Note = io_lib:format("~w events of the ~ts body (~w earlier events lost)",
                         [length(Events), What, Lost]),
    {Report, Problems} = report(Base ++ ".html", Events, [Title, io_lib:format(" (~w)", [Outcome])],
                                Note, Lost, Names,
                                TextOpts#{latency => maps:get(latency, Rec, none),
                                          slowest => maps:get(slowest, Opts, 10)}),
    {length(Events), [{Base ++ ".txt", "events"} | Report] ++ Diagrams, Problems}.

%% The text file's options: records (of the suite, the modules of the
%% calls traced, those the events touch, and those asked for), short
%% references, one line per message seen by both process tracing and
%% seq_trace.
text_opts(Suite, Events, Opts, FOpts) ->
    FOpts1 = FOpts#{short_refs => true, merge_seq => true},
    case maps:get(records, Opts) of
        _ when map_get(syntax, FOpts) =:= elixir ->
            FOpts1;                             % Elixir prints no records
        false ->
            FOpts1;
        R ->
            Asked = [M || is_list(R), M <- R, code:ensure_loaded(M) =:= {module, M}],
            Traced = case tracekit_spec:parse(maps:get(calls, Opts)) of
                         {ok, Cs} -> [M || #{module := M} <- Cs];
                         {error, _} -> []
                     end,
            Cache = lists:foldl(fun tracekit_records:learn/2,
                                tracekit_records:new([Suite || is_atom(Suite)] ++ Traced ++ Asked),
                                Events),
            FOpts1#{records => tracekit_records:defs(Cache)}
    end.

%% The events from the call of the test case function to its return, its
%% exception or the exit of the test case process (killed by a timetrap).
%% All of them when the call is not among them (overwritten by later
%% events). The process events of the test case process were recorded
%% for the exit: they stay only when asked for (`Procs').
body(Events, Pid, {M, F, A}, Procs) ->
    IsCall = fun(E) -> mark(E, Pid) =:= {call, {M, F, A}} end,
    Body = case lists:splitwith(fun(E) -> not IsCall(E) end, Events) of
               {_, []} -> Events;
               {_, [Call | Rest]} -> [Call | upto_end(Rest, Pid, {M, F, A})]
           end,
    [E || E <- Body, Procs orelse not is_proc_event(E, Pid) orelse mark(E, Pid) =:= exit].

upto_end([], _, _) -> [];
upto_end([E | Es], Pid, MFA) ->
    case mark(E, Pid) of
        {return_from, MFA} -> [E];
        {exception_from, MFA} -> [E];
        exit -> [E];
        _ -> [E | upto_end(Es, Pid, MFA)]
    end.

mark(E, Pid) when element(1, E) =:= trace_ts, element(2, E) =:= Pid ->
    case element(3, E) of
        call -> {call, setelement(3, element(4, E), length(element(3, element(4, E))))};
        Tag when Tag =:= return_from; Tag =:= exception_from -> {Tag, element(4, E)};
        exit -> exit;
        _ -> none
    end;
mark(_, _) ->
    none.

is_proc_event(E, Pid) ->
    element(1, E) =:= trace_ts andalso element(2, E) =:= Pid andalso
        lists:member(element(3, E), [spawn, spawned, exit, link, unlink, getting_linked,
                                     getting_unlinked, register, unregister]).

%% The HTML report of the case (tracekit_report), its table printed as the
%% text file prints (records, short references); a failure to write it
%% is said and leaves the other files.
report(File, Events, Title, Note, Lost, Names, FOpts) ->
    Latency = case FOpts of
                  #{latency := none} -> #{};
                  #{latency := H, slowest := N} ->
                      #{latency => H, latency_opts => #{sort => max, max => N}}
              end,
    Opts = maps:merge(maps:with([depth, line_length, records, short_refs, syntax], FOpts),
                      Latency#{title => ["tracekit: ", Title], note => Note, lost => Lost,
                               names => Names}),
    case tracekit_report:write(Events, File, Opts) of
        {ok, _} -> {[{File, "HTML report"}], []};
        {error, Why} -> {[], [{File, Why}]}
    end.

%% The slowest functions of the case (by their slowest call), after its
%% events (with the hook's `latency').
slowest_text(#{latency := H, opts := #{slowest := N, latency := Specs}} = Rec) ->
    C = maps:get(latency_counters, Rec, #{}),
    Secs = maps:get(latency_seconds, Rec, 0),
    View = #{functions => H, nodes => #{}, counters => C, seconds => Secs,
             previous => #{}, interval => Secs},
    ["\nslowest functions of the case, by their slowest call (tracekit:latency of ",
     spec_text(Specs), "; ", integer_to_list(maps:get(measured, C, 0)), " calls measured, ",
     integer_to_list(maps:get(unfinished, C, 0)), " unfinished):\n",
     tracekit_latency_view:lines(View, #{lines => N, sort => max})];
slowest_text(_) ->
    "".

spec_text(Specs) ->
    case tracekit_spec:parse(Specs) of
        {ok, Cs} -> lists:join(", ", [tracekit_spec:format(C) || C <- Cs]);
        {error, _} -> io_lib:format("~0tP", [Specs, 10])
    end.

diagram(File, What, Arrows, Names, FOpts) ->
    Pids = maps:keys(Names) ++ [P || {F, T, _} <- Arrows, P <- [F, T], is_pid(P)],
    Labels = maps:from_list([{P, tracekit_format:pid(P, FOpts)} || P <- Pids]),
    Text = tracekit_mermaid:sequence(Arrows, #{names => Labels#{untraced => "(untraced)"}}),
    ok = tracekit_private:write_file(File, unicode:characters_to_binary(Text)),
    {File, "Mermaid diagram of " ++ What}.

pids(Events) ->
    lists:usort([P || E <- Events, P <- tuple_to_list(E) ++ info(E), is_pid(P)]).

info({seq_trace, _, Info}) when is_tuple(Info) -> tuple_to_list(Info);
info({seq_trace, _, Info, _}) when is_tuple(Info) -> tuple_to_list(Info);
info(_) -> [].

%% The arrows of a Mermaid diagram: the messages process tracing saw
%% (ptrace), or those seq_trace saw (seq), as the report's diagram pairs
%% them (tracekit_report:arrows/2, folded once for both diagrams).
arrows_seen_by(Kind, Arrows, FOpts) ->
    [{F, T, label(M, FOpts)} || {F, T, M, Ks} <- Arrows, lists:member(Kind, Ks)].

label(Msg, #{syntax := elixir} = O) ->
    tracekit_format:message_label(Msg, 80, maps:with([syntax], O));
label(Msg, _O) ->
    tracekit_format:message_label(Msg, 80).
