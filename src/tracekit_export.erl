%% @doc Trace events exported for other tools: Chrome Trace Event Format
%% JSON (ui.perfetto.dev, chrome://tracing, speedscope), JSON Lines, and
%% folded stacks (flamegraph.pl, speedscope).
%%
%% ```
%% 1> {ok, R} = tracekit_ring:new(#{}).
%% 2> S = trace:session_create(s, {tracekit_ring, R}, []).
%% 3> trace:process(S, whereis(my_server), true, [call, send, 'receive', running, timestamp]).
%% 4> trace:function(S, {my_server, '_', '_'}, [{'_', [], [{return_trace}]}], [local]).
%%    ...
%% 5> tracekit_export:chrome(R, "/tmp/my_server.trace.json").
%% {ok,1834}
%% 6> tracekit_export:folded("/var/tmp/calls", "/tmp/calls.folded").
%% {ok,1806022}
%% '''
%%
%% The output is specified to the byte in EXPORTS.md. Name a Chrome
%% export `*.trace.json': speedscope takes a file named `*.chrome.json'
%% for a Chrome DevTools profile and fails to read it.
%%
%% A source is a list of events (the terms OTP's process tracer sends),
%% a {@link tracekit_ring} (drained), or a trace file, a wrap set's base
%% name, or a list of them (read with {@link tracekit_file:fold/4}, one
%% chunk per file in memory: a file of any size is exported in bounded
%% memory, except for what `folded' keeps per distinct stack). A
%% destination is a file name or an open io device
%% (written with `io:put_chars/2': open files with `{encoding, utf8}'; a
%% process that does not answer the io protocol is waited for, as io
%% waits), or a raw file from `file:open/2' with `[raw]', used by the
%% process that opened it. A file name is written as
%% the trace files it comes from are kept, since it holds their message
%% contents: with mode 0600, in a private directory beside it, and renamed
%% to the name when done (a file of that name is replaced, a link there is
%% replaced, not followed; a failed export leaves the name as it was).
%%
%% Errors are `{error, Reason}': `{bad_source, Term}', `{bad_dest, Term}',
%% `{bad_option, Option}', `{file, Path, Posix}' when the destination
%% cannot be written, `{write, Posix}' when writing fails part way, and
%% the read errors of {@link tracekit_file:fold/4}
%% (`{corrupt, File, Offset}', `{file, Path, Posix | not_a_trace}',
%% `{no_files, Path}'); a damaged file gives a complete output of the
%% events before the damage, then the error.
-module(tracekit_export).

-export([chrome/2, chrome/3, jsonl/2, jsonl/3, folded/2, folded/3,
         latency_svg/2, latency_svg/3]).
-export([term_text/2, fold_source/3, time_us/1]).

-export_type([source/0, dest/0, opts/0, error_reason/0]).

-type source() :: [tuple()] | tracekit_ring:ring() | tracekit_file:source().
-type dest() :: file:name_all() | io:device() | file:fd().
%% `names': registered names of processes, beside those that the events'
%% own `register' events say (as the CT hook knows them).
-type opts() :: #{names => #{pid() | port() => atom()}}.
-type error_reason() :: {bad_source, term()} | {bad_dest, term()}
                      | {bad_option, term()} | {file, term(), atom()}
                      | {write, term()} | tracekit_file:read_error().

-define(SCHED_TID, 1000000).
-define(MAX_PENDING, 65536).
-define(FLUSH_BYTES, 65536).
%% The texts of the atoms met during an export (the process dictionary's,
%% for the run of an export only).
-define(ATOM_TEXTS, {?MODULE, atom_texts}).
%% The least heap (words) of the process during an export: an event makes
%% many small terms, and a small heap collects them too often (a million
%% events: about half the CPU time).
-define(EXPORT_HEAP, 1 bsl 20).

%% The process the events are about, as the exports track it.
-record(proc, {id :: pid() | port(),
               node :: atom(),
               np = 0 :: non_neg_integer(),
               tid :: pos_integer(),
               %% "pid":P,"tid":T of its tracks (Chrome), made once
               ids = <<>> :: binary(),
               sched_ids = <<>> :: binary(),
               label :: binary(),
               announced = none :: none | binary(),
               sched = none :: none | binary(),
               stack = [] :: [{atom(), atom(), integer() | '?', binary()}],
               running = none :: none | binary(),
               gc = [] :: [{binary(), binary()}],
               last = 0 :: integer()}).

%% Messages sent and not yet received: Key => [{Seq, Receiver, Id}]
%% oldest first, and Seq => Key for forgetting the oldest. Only sends not
%% received are held.
-record(pending, {map = #{} :: #{term() => [{integer(), term(), pos_integer()}]},
                  order = gb_trees:empty() :: gb_trees:tree(integer(), term()),
                  count = 0 :: non_neg_integer(),
                  seq = 0 :: non_neg_integer()}).

-record(st, {mode :: chrome | jsonl | folded,
             out :: term(),
             buf = [] :: iolist(),
             size = 0 :: non_neg_integer(),
             n = 0 :: non_neg_integer(),
             clock = 0 :: integer(),
             timed = false :: boolean(),
             t0 = null :: integer() | null,
             node = none :: atom(),
             nodes = #{} :: #{atom() => pos_integer()},
             ntids = #{} :: #{atom() => non_neg_integer()},
             procs = #{} :: #{pid() | port() => #proc{}},
             names = #{} :: #{pid() | port() => atom()},
             regs = #{} :: #{atom() => pid() | port()},
             msgs = #pending{} :: #pending{},
             seqs = #pending{} :: #pending{},
             flow = 0 :: non_neg_integer(),
             first = true :: boolean(),
             stacks = #{} :: #{term() => non_neg_integer()},
             %% Chrome: the pid of each node and the tid of each process,
             %% by how busy they are (EXPORTS.md 3.1)
             node_ranks = #{} :: #{atom() => pos_integer()},
             ranks = #{} :: #{pid() | port() => pos_integer()}}).

%%% ---- API --------------------------------------------------------------------

%% @equiv chrome(Source, Dest, #{})
-spec chrome(source(), dest()) -> {ok, non_neg_integer()} | {error, error_reason()}.
chrome(Source, Dest) ->
    chrome(Source, Dest, #{}).

%% @doc Writes the events of `Source' to `Dest' as Chrome Trace Event
%% Format JSON (EXPORTS.md, section 3): a track per process, grouped per
%% node; calls as nested slices, scheduling and garbage collection as
%% slices on a second track, messages as flow arrows from send to
%% receive, process events as instants. Returns how many terms were read.
-spec chrome(source(), dest(), opts()) -> {ok, non_neg_integer()} | {error, error_reason()}.
chrome(Source, Dest, Opts) ->
    run(chrome, Source, Dest, Opts).

%% @equiv jsonl(Source, Dest, #{})
-spec jsonl(source(), dest()) -> {ok, non_neg_integer()} | {error, error_reason()}.
jsonl(Source, Dest) ->
    jsonl(Source, Dest, #{}).

%% @doc Writes the events of `Source' to `Dest' as JSON Lines (EXPORTS.md,
%% section 2): one object per event with typed fields; terms as Erlang
%% text, and as JSON where that is clean (atoms, numbers, UTF-8
%% binaries).
-spec jsonl(source(), dest(), opts()) -> {ok, non_neg_integer()} | {error, error_reason()}.
jsonl(Source, Dest, Opts) ->
    run(jsonl, Source, Dest, Opts).

%% @equiv folded(Source, Dest, #{})
-spec folded(source(), dest()) -> {ok, non_neg_integer()} | {error, error_reason()}.
folded(Source, Dest) ->
    folded(Source, Dest, #{}).

%% @doc Writes the call stacks of the events of `Source' to `Dest' as
%% folded stacks (`process;m:f/1;m:g/2 Microseconds', EXPORTS.md, section
%% 4), weighted by the time each process spent in them.
-spec folded(source(), dest(), opts()) -> {ok, non_neg_integer()} | {error, error_reason()}.
folded(Source, Dest, Opts) ->
    run(folded, Source, Dest, Opts).

%% @equiv latency_svg(Latency, Dest, #{})
-spec latency_svg(term(), dest()) -> {ok, non_neg_integer()} | {error, error_reason()}.
latency_svg(Latency, Dest) ->
    latency_svg(Latency, Dest, #{}).

%% @doc Writes latency histograms to `Dest' as one SVG document: a
%% drawing per function, durations on a log-scaled axis, the p50, p90,
%% p99 and maximum marked ({@link tracekit_latency_svg}). `Latency' is the
%% summary of a {@link tracekit:latency/2} trace (its `histograms'), those
%% histograms themselves (`#{MFA => #{returns, exceptions, ...}}'), or a
%% {@link tracekit_latency} tracer (read now). Options: `sort' (`total',
%% the default, or `max': by the slowest call) and `max' (the most
%% functions drawn, default 20). Returns how many functions were drawn.
-spec latency_svg(term(), dest(), #{sort => total | max, max => pos_integer()}) ->
          {ok, non_neg_integer()} | {error, error_reason()}.
latency_svg(Latency, Dest, Opts) when is_map(Opts) ->
    case {latency_functions(Latency), latency_opts(Opts)} of
        {{ok, Fns}, ok} ->
            to_dest(Dest,
                    fun(Out) ->
                            case write_out(Out, tracekit_latency_svg:document(Fns, Opts)) of
                                ok -> {{ok, min(map_size(Fns), maps:get(max, Opts, 20))}, ok};
                                {error, Why} -> {{error, {write, Why}}, abort}
                            end
                    end);
        {{error, _}, _} ->
            {error, {bad_source, Latency}};
        {_, Bad} ->
            Bad
    end;
latency_svg(_Latency, _Dest, Opts) ->
    {error, {bad_option, Opts}}.

latency_functions(#{histograms := Fns}) ->
    latency_functions(Fns);
latency_functions(Fns) when is_map(Fns) ->
    Ok = fun({M, F, A}, #{returns := R, exceptions := E}) when is_atom(M), is_atom(F),
                                                               is_integer(A) ->
                 tracekit_hist:check(R) =:= ok andalso tracekit_hist:check(E) =:= ok;
            (_, _) -> false
         end,
    case maps:size(maps:filter(fun(K, V) -> not Ok(K, V) end, Fns)) of
        0 -> {ok, Fns};
        _ -> {error, bad}
    end;
latency_functions(Tracer) ->
    try tracekit_latency:read(Tracer) of
        #{functions := Fns} -> {ok, Fns}
    catch
        error:badarg -> {error, bad}
    end.

latency_opts(Opts) ->
    case [{K, V} || K := V <- Opts,
                    not ((K =:= sort andalso (V =:= total orelse V =:= max))
                         orelse (K =:= max andalso is_integer(V) andalso V > 0))] of
        [] -> ok;
        [Bad | _] -> {error, {bad_option, Bad}}
    end.

%% @doc The text of a term as the exports write it (EXPORTS.md, 1.1): the
%% shell's one-line form, pids of `Node' as `<0.N.S>', those of other
%% nodes with the node's name.
-spec term_text(term(), node()) -> binary().
term_text(Term, Node) ->
    iolist_to_binary(text(Term, Node)).

%% @doc Folds `Fun' over the events of a source (a list of events, a ring,
%% trace files), in order. Trace files are read one chunk at a time.
-spec fold_source(fun((term(), Acc) -> Acc), Acc, source()) ->
          {ok, Acc} | {error, error_reason(), Acc}.
fold_source(Fun, Acc, Source) when is_list(Source) ->
    case source_kind(Source) of
        events -> {ok, lists:foldl(Fun, Acc, Source)};
        files -> tracekit_file:fold(Fun, Acc, Source);
        bad -> {error, {bad_source, Source}, Acc}
    end;
fold_source(Fun, Acc, Source) when is_binary(Source); is_atom(Source) ->
    tracekit_file:fold(Fun, Acc, Source);
fold_source(Fun, Acc, Source) ->
    %% A ring (a reference the NIF knows), or nothing that can be read.
    try tracekit_ring:drain(Source) of
        Events -> {ok, lists:foldl(Fun, Acc, Events)}
    catch
        error:_ -> {error, {bad_source, Source}, Acc}
    end.

source_kind(L) ->
    try length(L) of
        _ -> proper_source_kind(L)
    catch
        error:badarg -> bad                 % an improper list
    end.

proper_source_kind([]) -> events;
proper_source_kind([E | _]) when is_tuple(E) -> events;
proper_source_kind(L) ->
    case io_lib:char_list(L) of
        true -> files;
        false ->
            case lists:all(fun(F) -> is_binary(F) orelse is_atom(F)
                                         orelse (is_list(F) andalso io_lib:char_list(F))
                           end, L) of
                true -> files;
                false -> bad
            end
    end.

%% @doc A time of the exports' clock (nanoseconds) in microseconds with
%% three decimals, as the exports write times.
-spec time_us(integer()) -> binary().
time_us(Ns) when Ns < 0 ->
    <<"-", (time_us(-Ns))/binary>>;
time_us(Ns) when Ns < 10 -> <<"0.00", (integer_to_binary(Ns))/binary>>;
time_us(Ns) when Ns < 100 -> <<"0.0", (integer_to_binary(Ns))/binary>>;
time_us(Ns) when Ns < 1000 -> <<"0.", (integer_to_binary(Ns))/binary>>;
time_us(Ns) ->
    B = integer_to_binary(Ns),
    Int = byte_size(B) - 3,
    <<I:Int/binary, F:3/binary>> = B,
    <<I/binary, $., F/binary>>.

%%% ---- running an export --------------------------------------------------------

run(Mode, Source, Dest, Opts) when is_map(Opts) ->
    case check_opts(Opts) of
        ok when not (is_list(Source) orelse is_binary(Source) orelse is_atom(Source)
                     orelse is_reference(Source)) ->
            {error, {bad_source, Source}};
        ok when is_list(Source) ->
            case source_kind(Source) of
                bad -> {error, {bad_source, Source}};
                _ -> run1(Mode, Source, Dest, Opts)
            end;
        ok ->
            run1(Mode, Source, Dest, Opts);
        Error ->
            Error
    end;
run(_Mode, _Source, _Dest, Opts) ->
    {error, {bad_option, Opts}}.

run1(chrome, Source0, Dest, Opts) ->
    %% Two passes: the first ranks the processes. A ring is drained once.
    Source = case is_reference(Source0) of
                 true ->
                     try tracekit_ring:drain(Source0)
                     catch error:_ -> {bad, Source0}
                     end;
                 false -> Source0
             end,
    case Source =/= {bad, Source0} andalso ranks(Source) of
        {ok, NodeRanks, Ranks} ->
            run2(Source, Dest, Opts, #st{mode = chrome, node_ranks = NodeRanks, ranks = Ranks});
        {error, Why} ->
            {error, Why};
        false ->
            {error, {bad_source, Source0}}
    end;
run1(Mode, Source, Dest, Opts) ->
    run2(Source, Dest, Opts, #st{mode = Mode}).

run2(Source, Dest, Opts, St00) ->
    to_dest(Dest,
            fun(Out) ->
                    St0 = St00#st{out = Out, names = maps:get(names, Opts, #{})},
                    _ = put(?ATOM_TEXTS, #{}),
                    Heap = process_flag(min_heap_size, ?EXPORT_HEAP),
                    try
                        St1 = start(St0),
                        Fun = fun(E, St) -> event(E, St) end,
                        {Folded, St2} = case fold_source(Fun, St1, Source) of
                                            {ok, S} -> {ok, S};
                                            {error, R, S} -> {{error, R}, S}
                                        end,
                        St3 = flush(finish(St2), true),
                        %% A file damaged part way: its events before the
                        %% damage are kept (or all that could be read,
                        %% with damaged chunks skipped). A source of which
                        %% no event could be read does not replace what
                        %% Dest held.
                        case Folded of
                            ok -> {{ok, St3#st.n}, ok};
                            {error, {corrupt, _, _}} when St3#st.n > 0 -> {Folded, ok};
                            {error, {skipped, _}} when St3#st.n > 0 -> {Folded, ok};
                            {error, _} -> {Folded, abort}
                        end
                    catch
                        throw:{tracekit_export, Why} -> {{error, Why}, abort}
                    after
                        _ = erase(?ATOM_TEXTS),
                        _ = process_flag(min_heap_size, Heap)
                    end
            end).

%% Opens Dest, lets Write(Out) write it, and closes it: a file is put in
%% place when Write says `ok', and removed when it says `abort' or
%% raises. Write's result, or the error of the close when Write's was
%% not one.
to_dest(Dest, Write) ->
    case open_dest(Dest) of
        {ok, Out, Close} ->
            {Result, Keep} = try Write(Out)
                             catch Class:Reason:Stack ->
                                     _ = Close(abort),
                                     erlang:raise(Class, Reason, Stack)
                             end,
            case {Close(Keep), Result} of
                {ok, _} -> Result;
                {{error, _}, {error, _}} -> Result;
                {{error, Posix}, _} -> {error, {file, Dest, Posix}}
            end;
        {error, _} = Error ->
            Error
    end.

check_opts(Opts) ->
    case maps:to_list(maps:remove(names, Opts)) of
        [] ->
            case maps:get(names, Opts, #{}) of
                N when is_map(N) -> ok;
                N -> {error, {bad_option, {names, N}}}
            end;
        [Bad | _] ->
            {error, {bad_option, Bad}}
    end.

open_dest(Dest) when is_pid(Dest); is_atom(Dest), Dest =/= [] ->
    case Dest of
        standard_io -> {ok, {io, Dest}, fun(_) -> ok end};
        standard_error -> {ok, {io, Dest}, fun(_) -> ok end};
        _ when is_pid(Dest) -> {ok, {io, Dest}, fun(_) -> ok end};
        _ -> open_file(atom_to_list(Dest))
    end;
open_dest({file_descriptor, Module, _} = Dest)
  when Module =:= prim_file; Module =:= raw_file_io_delayed;
       Module =:= raw_file_io_compressed; Module =:= raw_file_io_list ->
    %% Only the modules of file:open/2's raw files: file:write/2 calls the
    %% module a descriptor names, and one naming `file' calls itself for
    %% ever.
    {ok, {raw, Dest}, fun(_) -> ok end};
open_dest(Dest) when is_binary(Dest); is_list(Dest) ->
    open_file(Dest);
open_dest(Dest) ->
    {error, {bad_dest, Dest}}.

%% Files hold message contents: written privately (0600, never through
%% a link) and put at Path when done.
open_file(Path) ->
    case tracekit_private:open_output(Path) of
        {ok, Fd, Done} -> {ok, {raw, Fd}, Done};
        {error, badarg} -> {error, {bad_dest, Path}};   % no file name
        {error, Posix} -> {error, {file, Path, Posix}}
    end.

emit(Data, #st{buf = Buf, size = Size} = St) ->
    St1 = St#st{buf = [Buf | Data], size = Size + iolist_size(Data)},
    case St1#st.size >= ?FLUSH_BYTES of
        true -> flush(St1, false);
        false -> St1
    end.

flush(#st{buf = Buf, out = Out} = St, _Last) ->
    case write_out(Out, Buf) of
        ok -> St#st{buf = [], size = 0};
        {error, Why} -> throw({tracekit_export, {write, Why}})
    end.

write_out({raw, Fd}, Data) ->
    %% One binary: a write of thousands of small pieces costs more. A
    %% descriptor another process opened raises.
    try file:write(Fd, iolist_to_binary(Data))
    catch error:Why -> {error, Why}
    end;
write_out({io, Dev}, Data) ->
    try io:put_chars(Dev, iolist_to_binary(Data))
    catch error:Why -> {error, Why}
    end.

%%% ---- the fold -----------------------------------------------------------------

start(#st{mode = chrome} = St) ->
    emit(<<"{\"traceEvents\":[">>, St);
start(St) ->
    St.

finish(#st{mode = chrome} = St0) ->
    St = close_all(St0),
    T0 = case St#st.t0 of null -> <<"null">>; T -> integer_to_binary(T) end,
    Tail = [<<"\n],">>,
            <<"\"otherData\":{\"format\":\"tracekit-export\",\"version\":1,\"events\":">>,
            integer_to_binary(St#st.n), <<",\"time_zero_ns\":">>, T0, <<"}}\n">>],
    emit(Tail, St);
finish(#st{mode = jsonl} = St) ->
    St;
finish(#st{mode = folded, stacks = Stacks, procs = Procs} = St) ->
    Multi = length(lists:usort([P#proc.node || P <- maps:values(Procs)])) > 1,
    Lines = maps:fold(
              fun({Id, Stack}, Ns, Acc) ->
                      W = (Ns + 500) div 1000,
                      case W of
                          0 -> Acc;
                          _ ->
                              #proc{node = Node, label = Label} = maps:get(Id, Procs),
                              Frames = [atom_name(Node) || Multi] ++ [Label]
                                  ++ [mfa_text(M, F, A) || {M, F, A, _} <- lists:reverse(Stack)],
                              Key = iolist_to_binary(lists:join($;, [semi(Fr) || Fr <- Frames])),
                              [{Key, W} | Acc]
                      end
              end, [], Stacks),
    %% Equal stack texts (two processes of one label) add up.
    Summed = lists:foldl(fun({K, W}, M) -> maps:update_with(K, fun(V) -> V + W end, W, M) end,
                         #{}, Lines),
    emit([[K, $\s, integer_to_binary(W), $\n] || {K, W} <- lists:sort(maps:to_list(Summed))], St).

semi(Frame) ->
    binary:replace(iolist_to_binary(Frame), <<";">>, <<"_">>, [global]).

event(E, St0) ->
    St = St0#st{n = St0#st.n + 1},
    {Time, St1} = clock(timestamp(E), St),
    case parse(E) of
        other ->
            emit_jsonl_other(E, St1);
        {Kind, Proc, Tag, Fields, Rest} ->
            Node = case Proc of
                       none -> St1#st.node;
                       _ -> node(Proc)
                   end,
            St2 = St1#st{node = Node},
            dispatch(St2#st.mode, #{event => E, kind => Kind, proc => Proc, tag => Tag,
                                    fields => Fields, rest => Rest, time => Time,
                                    node => Node}, St2)
    end.

%% The clock of EXPORTS.md 1.5.
clock(none, #st{timed = false, clock = C} = St) -> {C, St#st{clock = C + 1000}};
clock(none, #st{clock = C} = St) -> {C, St};
clock(Ns, #st{timed = false, clock = C} = St) ->
    T0 = Ns - C,
    {Ns - T0, St#st{timed = true, t0 = T0, clock = Ns - T0}};
clock(Ns, #st{t0 = T0} = St) ->
    {Ns - T0, St#st{clock = Ns - T0}}.

timestamp(E) when element(1, E) =:= trace_ts, tuple_size(E) >= 5 ->
    ts_ns(element(tuple_size(E), E));
timestamp({seq_trace, _, _, Ts}) ->
    ts_ns(Ts);
timestamp(_) ->
    none.

ts_ns({Mega, Sec, Micro}) when is_integer(Mega), is_integer(Sec), is_integer(Micro) ->
    (Mega * 1000000 + Sec) * 1000000000 + Micro * 1000;
ts_ns(Ns) when is_integer(Ns) -> Ns;
ts_ns({Ns, U}) when is_integer(Ns), is_integer(U) -> Ns;
ts_ns(_) -> none.

ts_term(E) when element(1, E) =:= trace_ts, tuple_size(E) >= 5 ->
    Ts = element(tuple_size(E), E),
    case ts_ns(Ts) of none -> none; _ -> {ok, Ts} end;
ts_term({seq_trace, _, _, Ts}) ->
    case ts_ns(Ts) of none -> none; _ -> {ok, Ts} end;
ts_term(_) ->
    none.

%% An event's kind, process, tag, named fields ({Key, {term, T}} or
%% {Key, {mfa, Text}}) and trailing terms; `other' for what is not one.
parse(E) when (element(1, E) =:= trace orelse element(1, E) =:= trace_ts),
              tuple_size(E) >= 4 ->
    L0 = tl(tuple_to_list(E)),
    L = case element(1, E) of trace_ts -> lists:droplast(L0); trace -> L0 end,
    case L of
        [_Tracee, Tag | Terms] when is_atom(Tag), Terms =/= [] ->
            {Fields, Rest, Tag1} = trace_fields(Tag, Terms),
            {trace, proc_of(E), Tag1, Fields, Rest};
        _ ->
            other
    end;
parse({seq_trace, Label, Info}) ->
    seq_parse(Label, Info);
parse({seq_trace, Label, Info, _Ts}) ->
    seq_parse(Label, Info);
parse(_) ->
    other.

seq_parse(Label, {Tag, {Last, Serial}, From, To, Msg} = Info)
  when (Tag =:= send orelse Tag =:= 'receive' orelse Tag =:= print),
       is_integer(Last), is_integer(Serial) ->
    {seq_trace, seq_proc(Info), Tag,
     [{label, {term, Label}}, {serial, {serial, Last, Serial}}, {from, {term, From}},
      {to, {term, To}}, {msg, {term, Msg}}], []};
seq_parse(Label, Info) ->
    Tag = case Info of
              _ when is_tuple(Info), tuple_size(Info) > 0, is_atom(element(1, Info)) ->
                  element(1, Info);
              _ -> info
          end,
    {seq_trace, none, Tag, [{label, {term, Label}}, {info, {term, Info}}], []}.

%% The process of an event (EXPORTS.md 1.4), or none: the tracee of a
%% trace event that parse/1 takes for one (a tag and a term at least).
proc_of(E) when element(1, E) =:= trace, tuple_size(E) >= 4, is_atom(element(3, E)) ->
    pid_or_none(element(2, E));
proc_of(E) when element(1, E) =:= trace_ts, tuple_size(E) >= 5, is_atom(element(3, E)) ->
    pid_or_none(element(2, E));
proc_of({seq_trace, _, Info}) -> seq_proc(Info);
proc_of({seq_trace, _, Info, _}) -> seq_proc(Info);
proc_of(_) -> none.

seq_proc({Tag, {Last, Serial}, From, To, _})
  when (Tag =:= send orelse Tag =:= 'receive' orelse Tag =:= print),
       is_integer(Last), is_integer(Serial) ->
    pid_or_none(case Tag of 'receive' -> To; _ -> From end);
seq_proc(_) ->
    none.

pid_or_none(P) when is_pid(P); is_port(P) -> P;
pid_or_none(_) -> none.

%% Chrome: the nodes by how many events their processes have, most
%% first, and each node's processes so (ties: the one seen first first):
%% their pids and tids (EXPORTS.md 3.1), from a first pass over the source.
ranks(Source) ->
    Count = fun(E, {N, M}) ->
                    case proc_of(E) of
                        none -> {N + 1, M};
                        P -> {N + 1, maps:update_with(P, fun({C, F}) -> {C + 1, F} end,
                                                      {1, N}, M)}
                    end
            end,
    case fold_source(Count, {0, #{}}, Source) of
        {ok, {_, M}} -> rank(M);
        {error, {bad_source, _} = Why, _} -> {error, Why};
        {error, _, {_, M}} -> rank(M)   % the export meets the error again
    end.

rank(Counts) ->
    Nodes = maps:fold(fun(P, {C, F}, Acc) ->
                              maps:update_with(node(P), fun({C0, F0}) -> {C0 + C, min(F0, F)} end,
                                               {C, F}, Acc)
                      end, #{}, Counts),
    Order = [N || {_, _, N} <- lists:sort([{-C, F, N} || N := {C, F} <- Nodes])],
    NodeRanks = maps:from_list(lists:zip(Order, lists:seq(1, length(Order)))),
    ByNode = lists:sort([{maps:get(node(P), NodeRanks), -C, F, P} || P := {C, F} <- Counts]),
    {_, Ranks} = lists:foldl(fun({NR, _, _, P}, {{NR, T}, Acc}) -> {{NR, T + 1}, Acc#{P => T + 1}};
                                ({NR, _, _, P}, {_, Acc}) -> {{NR, 1}, Acc#{P => 1}}
                             end, {none, #{}}, ByNode),
    {ok, NodeRanks, Ranks}.

%% EXPORTS.md 2.2.
trace_fields(Tag, [Msg, To | Rest]) when Tag =:= send; Tag =:= send_to_non_existing_process ->
    {[{msg, {term, Msg}}, {to, {term, To}}], Rest, Tag};
trace_fields('receive', [Msg | Rest]) ->
    {[{msg, {term, Msg}}], Rest, 'receive'};
trace_fields(call, [{M, F, Args} | Rest]) when is_atom(M), is_atom(F) ->
    {[{mfa, {mfa, M, F, args_arity(Args)}}, {args, {args, Args}}], Rest, call};
trace_fields(return_from, [{M, F, A}, Val | Rest]) when is_atom(M), is_atom(F) ->
    {[{mfa, {mfa, M, F, arity(A)}}, {value, {term, Val}}], Rest, return_from};
trace_fields(exception_from, [{M, F, A}, Exc | Rest]) when is_atom(M), is_atom(F) ->
    {[{mfa, {mfa, M, F, arity(A)}}, {exception, {term, Exc}}], Rest, exception_from};
trace_fields(return_to, [{M, F, A} | Rest]) when is_atom(M), is_atom(F) ->
    {[{mfa, {mfa, M, F, arity(A)}}], Rest, return_to};
trace_fields(return_to, [undefined | Rest]) ->
    {[{mfa, {text, <<"undefined">>}}], Rest, return_to};
trace_fields(spawn, [Child, {M, F, Args} | Rest]) when is_atom(M), is_atom(F) ->
    {[{child, {term, Child}}, {mfa, {mfa, M, F, args_arity(Args)}}, {args, {args, Args}}],
     Rest, spawn};
trace_fields(spawned, [Parent, {M, F, Args} | Rest]) when is_atom(M), is_atom(F) ->
    {[{parent, {term, Parent}}, {mfa, {mfa, M, F, args_arity(Args)}}, {args, {args, Args}}],
     Rest, spawned};
trace_fields(exit, [Reason | Rest]) ->
    {[{reason, {term, Reason}}], Rest, exit};
trace_fields(Tag, [Other | Rest]) when Tag =:= link; Tag =:= unlink; Tag =:= getting_linked;
                                       Tag =:= getting_unlinked ->
    {[{other, {term, Other}}], Rest, Tag};
trace_fields(Tag, [Name | Rest]) when Tag =:= register; Tag =:= unregister ->
    {[{name, {term, Name}}], Rest, Tag};
trace_fields(Tag, [MFA | Rest]) when Tag =:= in; Tag =:= out; Tag =:= in_exiting;
                                     Tag =:= out_exiting; Tag =:= out_exited ->
    V = case MFA of
            {M, F, A} when is_atom(M), is_atom(F) -> {mfa, M, F, arity(A)};
            _ -> {termtext, MFA}
        end,
    {[{mfa, V}], Rest, Tag};
trace_fields(Tag, [Info | Rest]) when Tag =:= gc_minor_start; Tag =:= gc_minor_end;
                                      Tag =:= gc_major_start; Tag =:= gc_major_end ->
    {[{info, {term, Info}}], Rest, Tag};
trace_fields(open, [Parent, Driver | Rest]) ->
    {[{parent, {term, Parent}}, {driver, {term, Driver}}], Rest, open};
trace_fields(closed, [Reason | Rest]) ->
    {[{reason, {term, Reason}}], Rest, closed};
trace_fields(Tag, [Term | Rest]) ->
    {[{term, {term, Term}}], Rest, {other, Tag}}.

args_arity(Args) when is_integer(Args) -> Args;
args_arity(Args) -> proper_length(Args, 0).

proper_length([], N) -> N;
proper_length(['...'], _) -> '?';
proper_length([_ | T], N) -> proper_length(T, N + 1);
proper_length(_, _) -> '?'.

arity(A) when is_integer(A) -> A;
arity(_) -> '?'.

%%% ---- JSON Lines ---------------------------------------------------------------

emit_jsonl_other(E, #st{mode = jsonl, n = N, node = Node} = St) ->
    emit([<<"{\"i\":">>, integer_to_binary(N), <<",\"kind\":\"other\",\"term\":">>,
          term_field(E, home(Node)), <<"}\n">>], St);
emit_jsonl_other(_E, St) ->
    St.

home(none) -> nonode@nohost;
home(Node) -> Node.

dispatch(jsonl, Ev, St) ->
    #{kind := Kind, proc := Proc, tag := Tag0, fields := Fields, rest := Rest,
      time := Time, node := Node, event := E} = Ev,
    Home = home(Node),
    Tag = case Tag0 of {other, T} -> T; T -> T end,
    Ts = case ts_term(E) of
             none -> [<<",\"ts\":null">>];
             {ok, TsT} -> [<<",\"ts\":">>, json_string(text(TsT, Home)),
                           <<",\"ts_ns\":">>, integer_to_binary(ts_ns(TsT))]
         end,
    Line = [<<"{\"i\":">>, integer_to_binary(St#st.n),
            <<",\"kind\":\"">>, atom_to_binary(Kind), <<"\",\"node\":">>,
            case Node of none -> <<"null">>; _ -> json_string(atom_to_binary(Node)) end,
            <<",\"time_us\":">>, time_us(Time), Ts,
            <<",\"tag\":">>, json_string(atom_to_binary(Tag)),
            <<",\"pid\":">>, case Proc of
                                 none -> <<"null">>;
                                 _ -> json_string(text(Proc, Home))
                             end,
            [[<<",\"">>, atom_to_binary(K), <<"\":">>, jsonl_value(V, Home)] || {K, V} <- Fields],
            case Rest of
                [] -> [];
                _ -> [<<",\"rest\":[">>, lists:join($,, [term_field(R, Home) || R <- Rest]), $]]
            end,
            <<"}\n">>],
    emit(Line, St);
dispatch(_Mode, #{proc := none}, St) ->
    St;
dispatch(Mode, #{proc := Id, node := Node, time := Time} = Ev, St0) ->
    {P0, St1} = proc(Id, Node, St0),
    St2 = case Mode of
              chrome -> announce(P0, Ev, St1);
              folded -> St1
          end,
    P1 = maps:get(Id, St2#st.procs),
    St3 = case Mode of
              folded -> account(P1, Time, St2);
              chrome -> St2
          end,
    P2 = maps:get(Id, St3#st.procs),
    {P3, St4} = apply_event(Mode, P2, Ev, St3),
    P4 = P3#proc{last = Time},
    St5 = St4#st{procs = (St4#st.procs)#{Id => P4}},
    relabel(Mode, P4, Ev, St5).

%% A process's record, made when it is first seen.
proc(Id, Node, #st{procs = Procs} = St) ->
    case Procs of
        #{Id := P} ->
            {P, St};
        _ ->
            Tid = case St#st.ranks of
                      #{Id := T} -> T;
                      _ -> maps:get(Node, St#st.ntids, 0) + 1
                  end,
            NP = maps:get(Node, St#st.node_ranks, 0),
            P = #proc{id = Id, node = Node, np = NP, tid = Tid, label = label(Id, St),
                      ids = ids(NP, Tid), sched_ids = ids(NP, Tid + ?SCHED_TID)},
            {P, St#st{procs = Procs#{Id => P}, ntids = (St#st.ntids)#{Node => Tid}}}
    end.

label(Id, #st{names = Names}) ->
    Pid = iolist_to_binary(text(Id, node(Id))),
    case Names of
        #{Id := Name} when is_atom(Name), Name =/= undefined ->
            iolist_to_binary([Pid, " (", text(Name, node(Id)), ")"]);
        _ ->
            Pid
    end.

%% A node's metadata, the first time one of its processes is announced.
node_meta(Node, NP, #st{nodes = Nodes} = St) ->
    case Nodes of
        #{Node := _} ->
            St;
        _ ->
            NPB = integer_to_binary(NP),
            St1 = out_event([<<"{\"ph\":\"M\",\"pid\":">>, NPB,
                             <<",\"name\":\"process_name\",\"args\":{\"name\":">>,
                             json_string(atom_to_binary(Node)), <<"}}">>], St),
            out_event([<<"{\"ph\":\"M\",\"pid\":">>, NPB,
                       <<",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":">>,
                       NPB, <<"}}">>], St1#st{nodes = Nodes#{Node => NP}})
    end.

%% The metadata events of EXPORTS.md 3.1.
announce(#proc{announced = none, node = Node, np = NP, tid = Tid, label = Label} = P, Ev, St0) ->
    St1 = node_meta(Node, NP, St0),
    St2 = out_event(thread_name(NP, Tid, Label), St1),
    St3 = out_event([<<"{\"ph\":\"M\",\"pid\":">>, integer_to_binary(NP), <<",\"tid\":">>,
                     integer_to_binary(Tid),
                     <<",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":">>,
                     integer_to_binary(Tid), <<"}}">>], St2),
    P1 = P#proc{announced = Label},
    announce(P1, Ev, St3#st{procs = (St3#st.procs)#{P#proc.id => P1}});
announce(#proc{sched = none, np = NP, tid = Tid, label = Label} = P, #{tag := Tag}, St)
  when Tag =:= in; Tag =:= out; Tag =:= in_exiting; Tag =:= out_exiting; Tag =:= out_exited;
       Tag =:= gc_minor_start; Tag =:= gc_minor_end; Tag =:= gc_major_start;
       Tag =:= gc_major_end ->
    St1 = out_event(thread_name(NP, Tid + ?SCHED_TID, <<Label/binary, " scheduling">>), St),
    St1#st{procs = (St1#st.procs)#{P#proc.id => P#proc{sched = Label}}};
announce(_P, _Ev, St) ->
    St.

thread_name(NP, Tid, Name) ->
    [<<"{\"ph\":\"M\",\"pid\":">>, integer_to_binary(NP), <<",\"tid\":">>,
     integer_to_binary(Tid), <<",\"name\":\"thread_name\",\"args\":{\"name\":">>,
     json_string(Name), <<"}}">>].

%% A register event gives the process a name: later sends to the name
%% go to it, and (Chrome) its tracks are named again.
relabel(Mode, #proc{id = Id} = P, #{kind := trace, tag := register,
                                   fields := [{name, {term, Name}}]}, St) when is_atom(Name) ->
    Label = iolist_to_binary([text(Id, node(Id)), " (", text(Name, node(Id)), ")"]),
    P1 = P#proc{label = Label},
    St1 = St#st{regs = (St#st.regs)#{Name => Id}, names = (St#st.names)#{Id => Name}},
    case Mode of
        chrome when P#proc.announced =/= Label ->
            NP = P#proc.np,
            St2 = out_event(thread_name(NP, P#proc.tid, Label), St1),
            {St3, Sched} = case P#proc.sched of
                               none -> {St2, none};
                               _ -> {out_event(thread_name(NP, P#proc.tid + ?SCHED_TID,
                                                           <<Label/binary, " scheduling">>),
                                               St2), Label}
                           end,
            St3#st{procs = (St3#st.procs)#{Id => P1#proc{announced = Label, sched = Sched}}};
        _ ->
            St1#st{procs = (St1#st.procs)#{Id => P1}}
    end;
relabel(_Mode, _P, _Ev, St) ->
    St.

out_event(Obj, #st{first = true} = St) ->
    emit([$\n, Obj], St#st{first = false});
out_event(Obj, St) ->
    emit([<<",\n">>, Obj], St).

%% Folded stacks: the time since the process's previous event goes to
%% its stack.
account(#proc{stack = []}, _Time, St) ->
    St;
account(#proc{id = Id, stack = Stack, last = Last}, Time, #st{stacks = S} = St) when Time > Last ->
    Key = {Id, Stack},
    St#st{stacks = S#{Key => maps:get(Key, S, 0) + Time - Last}};
account(_P, _Time, St) ->
    St.

%%% ---- calls, scheduling, messages (Chrome and folded) ---------------------------

apply_event(Mode, P, #{kind := trace, tag := call, fields := [{mfa, {mfa, M, F, A}}, {args, {args, Args}}]} = Ev, St) ->
    ArgsText = case Mode of
                   chrome -> iolist_to_binary(args_text(Args, P#proc.node));
                   folded -> <<>>
               end,
    St1 = chrome_out(Mode, fun() -> slice(<<"B">>, P, Ev, <<"call">>, mfa_text(M, F, A), none)
                           end, St),
    {P#proc{stack = [{M, F, A, ArgsText} | P#proc.stack]}, St1};
apply_event(Mode, P, #{kind := trace, tag := Tag, fields := [{mfa, {mfa, M, F, A}}, {_, {term, V}}]} = Ev, St)
  when Tag =:= return_from; Tag =:= exception_from ->
    case split_at(M, F, A, P#proc.stack) of
        none ->
            {P, St};
        {Above, Frame, Below} ->
            Key = case Tag of return_from -> <<"return">>; exception_from -> <<"exception">> end,
            St1 = ends(Mode, P, Ev, Above, St),
            St2 = chrome_out(Mode, fun() -> slice(<<"E">>, P, Ev, <<"call">>, frame_text(Frame),
                                                  [frame_args(Frame), {Key, text(V, P#proc.node)}])
                               end, St1),
            {P#proc{stack = Below}, St2}
    end;
apply_event(Mode, P, #{kind := trace, tag := return_to, fields := [{mfa, {mfa, M, F, A}}]} = Ev, St) ->
    case split_at(M, F, A, P#proc.stack) of
        none -> {P, St};
        {Above, Frame, Below} -> {P#proc{stack = [Frame | Below]}, ends(Mode, P, Ev, Above, St)}
    end;
apply_event(Mode, P, #{kind := trace, tag := exit} = Ev, St) ->
    St1 = chrome_out(Mode, fun() -> instant(P, Ev) end, St),
    {P#proc{stack = []}, ends(Mode, P, Ev, P#proc.stack, St1)};
apply_event(folded, P, _Ev, St) ->
    {P, St};
apply_event(chrome, P, #{tag := Tag} = Ev, St)
  when Tag =:= in; Tag =:= in_exiting; Tag =:= out; Tag =:= out_exiting; Tag =:= out_exited;
       Tag =:= gc_minor_start; Tag =:= gc_major_start; Tag =:= gc_minor_end;
       Tag =:= gc_major_end ->
    sched_event(P, Ev, St);
apply_event(chrome, P, Ev, St) ->
    msg_event(P, Ev, St).

%% Chrome: scheduling and garbage collection, on the scheduling track.
sched_event(P, #{kind := trace, tag := Tag, fields := [{mfa, V}]} = Ev, St)
  when Tag =:= in; Tag =:= in_exiting ->
    case P#proc.running of
        none ->
            MFA = field_text(V, P#proc.node),
            {P#proc{running = MFA},
             out_event(sched_slice(<<"B">>, P, Ev, <<"sched">>, <<"running">>, none), St)};
        _ ->
            {P, St}
    end;
sched_event(P, #{kind := trace, tag := Tag, fields := [{mfa, V}]} = Ev, St)
  when Tag =:= out; Tag =:= out_exiting; Tag =:= out_exited ->
    case P#proc.running of
        none ->
            {P, St};
        In ->
            MFA = field_text(V, P#proc.node),
            {P#proc{running = none},
             out_event(sched_slice(<<"E">>, P, Ev, <<"sched">>, <<"running">>,
                                   [{<<"in">>, In}, {<<"out">>, MFA}]), St)}
    end;
sched_event(P, #{kind := trace, tag := Tag, fields := [{info, {term, I}}]} = Ev, St)
  when Tag =:= gc_minor_start; Tag =:= gc_major_start; Tag =:= gc_minor_end; Tag =:= gc_major_end ->
    {Name, Phase} = case Tag of
                        gc_minor_start -> {<<"gc_minor">>, start};
                        gc_major_start -> {<<"gc_major">>, start};
                        gc_minor_end -> {<<"gc_minor">>, 'end'};
                        gc_major_end -> {<<"gc_major">>, 'end'}
                    end,
    Info = text(I, P#proc.node),
    case {Phase, lists:keyfind(Name, 1, P#proc.gc)} of
        {start, false} ->
            {P#proc{gc = [{Name, Info} | P#proc.gc]},
             out_event(sched_slice(<<"B">>, P, Ev, <<"gc">>, Name, none), St)};
        {'end', {Name, Start}} ->
            {P#proc{gc = lists:keydelete(Name, 1, P#proc.gc)},
             out_event(sched_slice(<<"E">>, P, Ev, <<"gc">>, Name,
                                   [{<<"start">>, Start}, {<<"end">>, Info}]), St)};
        _ ->
            {P, St}
    end;
sched_event(P, Ev, St) ->
    {P, out_event(instant(P, Ev), St)}.

%% Chrome: messages and the instants of the other events, on the main track.
msg_event(P, #{kind := trace, tag := send, fields := [{msg, {term, Msg}}, {to, {term, To}}]} = Ev, St) ->
    Node = P#proc.node,
    St1 = out_event(slice(<<"X">>, P, Ev, <<"msg">>, <<"send">>,
                          [{<<"msg">>, text(Msg, Node)}, {<<"to">>, text(To, Node)}]), St),
    Id = St1#st.flow + 1,
    Receiver = receiver(To, St1),
    St2 = St1#st{flow = Id, msgs = pend(Msg, Receiver, Id, St1#st.msgs)},
    {P, out_event(flow(<<"s">>, P, Ev, <<"msg">>, <<"message">>, Id), St2)};
msg_event(P, #{kind := trace, tag := send_to_non_existing_process,
                         fields := [{msg, {term, Msg}}, {to, {term, To}}]} = Ev, St) ->
    Node = P#proc.node,
    {P, out_event(slice(<<"X">>, P, Ev, <<"msg">>, <<"send (no such process)">>,
                        [{<<"msg">>, text(Msg, Node)}, {<<"to">>, text(To, Node)}]), St)};
msg_event(P, #{kind := trace, tag := 'receive', fields := [{msg, {term, Msg}}]} = Ev, St) ->
    St1 = out_event(slice(<<"X">>, P, Ev, <<"msg">>, <<"receive">>,
                          [{<<"msg">>, text(Msg, P#proc.node)}]), St),
    case unpend(Msg, P#proc.id, St1#st.msgs) of
        none -> {P, St1};
        {Id, Msgs} -> {P, out_event(flow(<<"f">>, P, Ev, <<"msg">>, <<"message">>, Id),
                                    St1#st{msgs = Msgs})}
    end;
msg_event(P, #{kind := seq_trace, tag := Tag,
                         fields := [{label, {term, L}}, {serial, {serial, Last, Ser}},
                                    {from, {term, From}}, {to, {term, To}}, {msg, {term, Msg}}]} = Ev,
            St) ->
    Node = P#proc.node,
    Serial = iolist_to_binary(["[", integer_to_binary(Last), ",", integer_to_binary(Ser), "]"]),
    Common = [{<<"label">>, text(L, Node)}, {<<"serial">>, Serial}, {<<"msg">>, text(Msg, Node)}],
    Key = {L, {Last, Ser}, From},
    case Tag of
        send ->
            St1 = out_event(slice(<<"X">>, P, Ev, <<"seq_trace">>, <<"seq send">>,
                                  Common ++ [{<<"to">>, text(To, Node)}]), St),
            Id = St1#st.flow + 1,
            St2 = St1#st{flow = Id, seqs = pend(Key, any, Id, St1#st.seqs)},
            {P, out_event(flow(<<"s">>, P, Ev, <<"seq_trace">>, <<"seq_trace">>, Id), St2)};
        'receive' ->
            St1 = out_event(slice(<<"X">>, P, Ev, <<"seq_trace">>, <<"seq receive">>,
                                  Common ++ [{<<"from">>, text(From, Node)}]), St),
            case unpend(Key, any, St1#st.seqs) of
                none -> {P, St1};
                {Id, Seqs} ->
                    {P, out_event(flow(<<"f">>, P, Ev, <<"seq_trace">>, <<"seq_trace">>, Id),
                                  St1#st{seqs = Seqs})}
            end;
        print ->
            {P, out_event(instant_obj(P, Ev, <<"seq print">>, Common), St)}
    end;
msg_event(P, Ev, St) ->
    {P, out_event(instant(P, Ev), St)}.

chrome_out(chrome, Fun, St) -> out_event(Fun(), St);
chrome_out(folded, _Fun, St) -> St.

%% E events for the frames in Above (top first), args {}.
ends(chrome, P, Ev, Above, St) ->
    lists:foldl(fun(Frame, S) ->
                        out_event(slice(<<"E">>, P, Ev, <<"call">>, frame_text(Frame),
                                        [frame_args(Frame)]), S)
                end, St, Above);
ends(folded, _P, _Ev, _Above, St) ->
    St.

%% The stack split at its topmost frame matching M:F/A.
split_at(M, F, A, Stack) ->
    split_at(M, F, A, Stack, []).

split_at(_, _, _, [], _) -> none;
split_at(M, F, A, [{M, F, B, _} = Frame | Below], Above)
  when A =:= B; A =:= '?'; B =:= '?' ->
    {lists:reverse(Above), Frame, Below};
split_at(M, F, A, [Frame | Below], Above) ->
    split_at(M, F, A, Below, [Frame | Above]).

frame_text({M, F, A, _}) -> mfa_text(M, F, A).

frame_args({_, _, _, Args}) -> {<<"args">>, Args}.

mfa_text(M, F, A) ->
    iolist_to_binary([atom_text(M), $:, atom_text(F), $/,
                      case A of '?' -> <<"?">>; _ -> integer_to_binary(A) end]).

field_text({mfa, M, F, A}, _Node) -> mfa_text(M, F, A);
field_text({termtext, T}, Node) -> iolist_to_binary(text(T, Node));
field_text({text, B}, _Node) -> B;
field_text({term, T}, Node) -> iolist_to_binary(text(T, Node));
field_text({args, A}, Node) -> iolist_to_binary(args_text(A, Node));
field_text({serial, L, S}, _Node) ->
    iolist_to_binary(["[", integer_to_binary(L), ",", integer_to_binary(S), "]"]).

%% Where a send goes, for pairing: a pid, the process registered under a
%% name, or any receiver.
receiver(To, _St) when is_pid(To); is_port(To) -> To;
receiver(To, #st{regs = Regs, names = Names}) when is_atom(To) ->
    case Regs of
        #{To := P} -> P;
        _ ->
            case [P || P := N <- Names, N =:= To] of
                [P | _] -> P;
                [] -> any
            end
    end;
receiver(_To, _St) ->
    any.

pend(Key, Receiver, Id, #pending{count = C, seq = S} = Pd0) ->
    Pd = case C >= ?MAX_PENDING of
             true -> forget_oldest(Pd0);
             false -> Pd0
         end,
    Entry = {S, Receiver, Id},
    Pd#pending{map = maps:update_with(Key, fun(L) -> L ++ [Entry] end, [Entry], Pd#pending.map),
               order = gb_trees:insert(S, Key, Pd#pending.order),
               count = Pd#pending.count + 1, seq = S + 1}.

forget_oldest(#pending{map = Map, order = Order} = Pd) ->
    {S, Key, Order1} = gb_trees:take_smallest(Order),
    Map1 = case lists:keydelete(S, 1, maps:get(Key, Map)) of
               [] -> maps:remove(Key, Map);
               L -> Map#{Key := L}
           end,
    Pd#pending{map = Map1, order = Order1, count = Pd#pending.count - 1}.

unpend(Key, Receiver, #pending{map = Map, order = Order} = Pd) ->
    case Map of
        #{Key := L} ->
            case take_first(L, Receiver, []) of
                none ->
                    none;
                {S, Id, L1} ->
                    Map1 = case L1 of
                               [] -> maps:remove(Key, Map);
                               _ -> Map#{Key := L1}
                           end,
                    {Id, Pd#pending{map = Map1, order = gb_trees:delete(S, Order),
                                    count = Pd#pending.count - 1}}
            end;
        _ ->
            none
    end.

take_first([], _R, _Acc) -> none;
take_first([{S, To, Id} | T], R, Acc) when To =:= R; To =:= any ->
    {S, Id, lists:reverse(Acc, T)};
take_first([E | T], R, Acc) ->
    take_first(T, R, [E | Acc]).

%% Closing what is open at the end (EXPORTS.md 3.3).
close_all(#st{procs = Procs, nodes = Nodes} = St) ->
    Ordered = lists:sort([{maps:get(P#proc.node, Nodes, 0), P#proc.tid, P}
                          || P <- maps:values(Procs)]),
    lists:foldl(fun({_, _, P}, S) -> close_proc(P, S) end, St, Ordered).

close_proc(#proc{last = T} = P, St) ->
    Ev = #{time => T},
    St1 = lists:foldl(fun(Frame, S) ->
                              out_event(slice(<<"E">>, P, Ev, <<"call">>, frame_text(Frame),
                                              [frame_args(Frame)]), S)
                      end, St, P#proc.stack),
    St2 = lists:foldl(fun({Name, Info}, S) ->
                              out_event(sched_slice(<<"E">>, P, Ev, <<"gc">>, Name,
                                                    [{<<"start">>, Info}]), S)
                      end, St1, P#proc.gc),
    case P#proc.running of
        none -> St2;
        In -> out_event(sched_slice(<<"E">>, P, Ev, <<"sched">>, <<"running">>,
                                    [{<<"in">>, In}]), St2)
    end.

%%% ---- Chrome objects -------------------------------------------------------------

ids(NP, Tid) ->
    iolist_to_binary([<<"\"pid\":">>, integer_to_binary(NP), <<",\"tid\":">>,
                      integer_to_binary(Tid)]).

slice(Ph, P, #{time := T}, Cat, Name, Args) ->
    [<<"{\"ph\":\"">>, Ph, <<"\",">>, P#proc.ids, <<",\"ts\":">>, time_us(T),
           case Ph of <<"X">> -> <<",\"dur\":0.000">>; _ -> <<>> end,
           <<",\"cat\":\"">>, Cat, <<"\",\"name\":">>, json_string(Name),
           opt_args(Args), <<"}">>].

sched_slice(Ph, P, #{time := T}, Cat, Name, Args) ->
    [<<"{\"ph\":\"">>, Ph, <<"\",">>, P#proc.sched_ids, <<",\"ts\":">>, time_us(T),
           <<",\"cat\":\"">>, Cat, <<"\",\"name\":\"">>, Name,
           <<"\"">>, opt_args(Args), <<"}">>].

flow(Ph, P, #{time := T}, Cat, Name, Id) ->
    [<<"{\"ph\":\"">>, Ph, <<"\",">>,
           case Ph of <<"f">> -> <<"\"bp\":\"e\",">>; _ -> <<>> end,
           P#proc.ids, <<",\"ts\":">>, time_us(T),
           <<",\"cat\":\"">>, Cat, <<"\",\"name\":\"">>, Name, <<"\",\"id\":">>,
           integer_to_binary(Id), <<"}">>].

instant(P, #{tag := Tag0, fields := Fields, rest := Rest} = Ev) ->
    Tag = case Tag0 of {other, T} -> T; T -> T end,
    Node = P#proc.node,
    Args = [{atom_to_binary(K), field_text(V, Node)} || {K, V} <- Fields],
    RestArg = case Rest of
                  [] -> [];
                  _ -> [{<<"rest">>, {list, [iolist_to_binary(text(R, Node)) || R <- Rest]}}]
              end,
    instant_obj(P, Ev, atom_to_binary(Tag), Args ++ RestArg).

instant_obj(P, #{time := T}, Name, Args) ->
    [<<"{\"ph\":\"i\",\"s\":\"t\",">>, P#proc.ids, <<",\"ts\":">>, time_us(T),
           <<",\"cat\":\"proc\",\"name\":">>, json_string(Name),
           <<",\"args\":">>, args(Args), <<"}">>].

opt_args(none) -> [];
opt_args(Args) -> [<<",\"args\":">>, args(Args)].

args(Args) ->
    [${, lists:join($,, [[json_string(K), $:,
                          case V of
                              {list, L} -> [$[, lists:join($,, [json_string(X) || X <- L]), $]];
                              _ -> json_string(V)
                          end] || {K, V} <- Args]), $}].

%%% ---- JSON --------------------------------------------------------------------

jsonl_value({term, T}, Home) -> term_field(T, Home);
jsonl_value({args, A}, Home) -> [<<"{\"erl\":">>, json_string(args_text(A, Home)), $}];
jsonl_value({serial, L, S}, _Home) ->
    [$[, integer_to_binary(L), $,, integer_to_binary(S), $]];
jsonl_value(V, Home) -> json_string(field_text(V, Home)).

%% A term as {"erl":TEXT[,"json":V]} (EXPORTS.md 1.7).
term_field(T, Home) ->
    [<<"{\"erl\":">>, json_string(text(T, Home)),
     case clean_json(T) of
         none -> [];
         J -> [<<",\"json\":">>, J]
     end, $}].

-define(MAX_SAFE, 9007199254740991).

clean_json(true) -> <<"true">>;
clean_json(false) -> <<"false">>;
clean_json(A) when is_atom(A) -> json_string(atom_to_binary(A));
clean_json(I) when is_integer(I), I >= -?MAX_SAFE, I =< ?MAX_SAFE -> integer_to_binary(I);
clean_json(F) when is_float(F) -> float_text(F);
clean_json(B) when is_binary(B) ->
    case unicode:characters_to_binary(B, utf8, utf8) of
        B -> json_string(B);
        _ -> none
    end;
clean_json(_) -> none.

json_string(Text) ->
    Bin = iolist_to_binary(Text),
    case binary:match(Bin, json_specials()) of
        nomatch -> [$", Bin, $"];
        _ -> [$", json_escape(Bin, Bin, 0, 0, []), $"]
    end.

%% The bytes a JSON string escapes, as a compiled pattern (made once).
json_specials() ->
    case persistent_term:get({?MODULE, json_specials}, none) of
        none ->
            P = binary:compile_pattern([<<C>> || C <- lists:seq(0, 31) ++ [$", $\\, 127]]),
            persistent_term:put({?MODULE, json_specials}, P),
            P;
        P ->
            P
    end.

%% Runs of bytes that need no escape are copied as sub-binaries.
json_escape(<<>>, Orig, Start, Len, Acc) ->
    lists:reverse([binary_part(Orig, Start, Len) | Acc]);
json_escape(<<C, Rest/binary>>, Orig, Start, Len, Acc)
  when C < 32; C =:= $"; C =:= $\\; C =:= 127 ->
    Esc = case C of
              $" -> <<"\\\"">>;
              $\\ -> <<"\\\\">>;
              $\b -> <<"\\b">>;
              $\t -> <<"\\t">>;
              $\n -> <<"\\n">>;
              $\f -> <<"\\f">>;
              $\r -> <<"\\r">>;
              _ -> iolist_to_binary(io_lib:format("\\u~4.16.0b", [C]))
          end,
    json_escape(Rest, Orig, Start + Len + 1, 0, [Esc, binary_part(Orig, Start, Len) | Acc]);
json_escape(<<_, Rest/binary>>, Orig, Start, Len, Acc) ->
    json_escape(Rest, Orig, Start, Len + 1, Acc).

%%% ---- term text (EXPORTS.md 1.1) ------------------------------------------------

text(I, _Node) when is_integer(I) -> integer_to_binary(I);
text(F, _Node) when is_float(F) -> float_text(F);
text(A, _Node) when is_atom(A) -> atom_text(A);
text([], _Node) -> <<"[]">>;
text(L, Node) when is_list(L) ->
    case is_string(L) of
        true -> [$", [char_esc(C, $") || C <- L], $"];
        false -> [$[, list_text(L, Node), $]]
    end;
text(T, Node) when is_tuple(T) ->
    [${, lists:join($,, [text(X, Node) || X <- tuple_to_list(T)]), $}];
text(M, Node) when is_map(M) ->
    Keys = lists:sort(maps:keys(M)),
    [<<"#{">>, lists:join($,, [[text(K, Node), <<" => ">>, text(maps:get(K, M), Node)]
                               || K <- Keys]), $}];
text(B, _Node) when is_binary(B) -> binary_text(B);
text(B, _Node) when is_bitstring(B) ->
    Whole = bit_size(B) div 8,
    Bits = bit_size(B) rem 8,
    <<Bytes:Whole/binary, Last:Bits>> = B,
    [<<"<<">>, [[integer_to_binary(X), $,] || <<X>> <= Bytes],
     integer_to_binary(Last), $:, integer_to_binary(Bits), <<">>">>];
text(P, Node) when is_pid(P) ->
    <<131, 88, R0/binary>> = term_to_binary(P),
    {_, <<Id:32, Serial:32, _/binary>>} = skip_atom(R0),
    [$<, node_part(node(P), Node), $., integer_to_binary(Id), $., integer_to_binary(Serial), $>];
text(P, Node) when is_port(P) ->
    Id = case term_to_binary(P) of
             <<131, 89, R0/binary>> -> {_, <<I:32, _/binary>>} = skip_atom(R0), I;
             <<131, 120, R0/binary>> -> {_, <<I:64, _/binary>>} = skip_atom(R0), I
         end,
    [<<"#Port<">>, node_part(node(P), Node), $., integer_to_binary(Id), $>];
text(R, Node) when is_reference(R) ->
    <<131, 90, Len:16, R0/binary>> = term_to_binary(R),
    {_, <<_Creation:32, Words:(Len * 4)/binary>>} = skip_atom(R0),
    Ws = [integer_to_binary(W) || <<W:32>> <= Words],
    [<<"#Ref<">>, node_part(node(R), Node), [[$., W] || W <- lists:reverse(Ws)], $>];
text(F, _Node) when is_function(F) ->
    case erlang:fun_info(F, type) of
        {type, external} ->
            {module, M} = erlang:fun_info(F, module),
            {name, N} = erlang:fun_info(F, name),
            {arity, A} = erlang:fun_info(F, arity),
            [<<"fun ">>, atom_text(M), $:, atom_text(N), $/, integer_to_binary(A)];
        {type, local} ->
            <<131, 112, _Size:32, _Arity:8, _Uniq:16/binary, Index:32, _NumFree:32,
              R0/binary>> = term_to_binary(F),
            {Mod, R1} = skip_atom(R0),
            {_OldIndex, R2} = ext_int(R1),
            {OldUniq, _} = ext_int(R2),
            [<<"#Fun<">>, Mod, $., integer_to_binary(Index), $., integer_to_binary(OldUniq), $>]
    end.

node_part(Node, Node) -> $0;
node_part(Node, _) -> atom_to_binary(Node).

skip_atom(<<119, L, A:L/binary, R/binary>>) -> {A, R};
skip_atom(<<118, L:16, A:L/binary, R/binary>>) -> {A, R};
skip_atom(<<100, L:16, A:L/binary, R/binary>>) -> {A, R};
skip_atom(<<115, L, A:L/binary, R/binary>>) -> {A, R}.

ext_int(<<97, I, R/binary>>) -> {I, R};
ext_int(<<98, I:32/signed, R/binary>>) -> {I, R}.

%% A call's arguments: a list of terms, each its own text (never a
%% string: the arguments [8] are not "\b").
args_text([_ | _] = Args, Node) -> [$[, list_text(Args, Node), $]];
args_text(Args, Node) -> text(Args, Node).

list_text([H | T], Node) when is_list(T) ->
    case T of
        [] -> text(H, Node);
        _ -> [text(H, Node), $, | list_text(T, Node)]
    end;
list_text([H | T], Node) ->
    [text(H, Node), $|, text(T, Node)].

is_string([]) -> true;
is_string([C | T]) when is_integer(C), C >= 32, C =< 126 -> is_string(T);
is_string([C | T]) when is_integer(C), C >= 160, C =< 255 -> is_string(T);
is_string([C | T]) when is_integer(C), C >= 8, C =< 13 -> is_string(T);
is_string([27 | T]) -> is_string(T);
is_string(_) -> false.

binary_text(<<>>) -> <<"<<>>">>;
binary_text(B) ->
    case utf8_printable(B) of
        true ->
            [<<"<<\"">>, [char_esc(C, $") || C <- unicode:characters_to_list(B)], <<"\"/utf8>>">>];
        false ->
            case latin1_printable(B) of
                true -> [<<"<<\"">>, [char_esc(C, $") || <<C>> <= B], <<"\">>">>];
                false -> [<<"<<">>, lists:join($,, [integer_to_binary(C) || <<C>> <= B]), <<">>">>]
            end
    end.

%% UTF-8 of printable latin-1 code points, one of them at least 128 (the
%% shell's default printable range, +pc latin1).
utf8_printable(B) ->
    case unicode:characters_to_list(B, utf8) of
        L when is_list(L) ->
            lists:any(fun(C) -> C > 127 end, L) andalso lists:all(fun printable_latin1/1, L);
        _ ->
            false
    end.

printable_latin1(C) ->
    (C >= 32 andalso C =< 126) orelse (C >= 160 andalso C =< 255)
        orelse (C >= 8 andalso C =< 13) orelse C =:= 27.

latin1_printable(B) ->
    lists:all(fun printable_latin1/1, binary_to_list(B)).

%% A code point in a quoted atom or string (EXPORTS.md 1.3).
char_esc($\\, _Q) -> <<"\\\\">>;
char_esc(Q, Q) -> [$\\, Q];
char_esc($\b, _) -> <<"\\b">>;
char_esc($\t, _) -> <<"\\t">>;
char_esc($\n, _) -> <<"\\n">>;
char_esc($\v, _) -> <<"\\v">>;
char_esc($\f, _) -> <<"\\f">>;
char_esc($\r, _) -> <<"\\r">>;
char_esc($\e, _) -> <<"\\e">>;
char_esc(C, _) when C < 32; C >= 127, C =< 159 ->
    [$\\, $0 + (C bsr 6), $0 + ((C bsr 3) band 7), $0 + (C band 7)];
char_esc(C, _) when C < 128 -> C;
char_esc(C, _) -> unicode:characters_to_binary([C]).

atom_text(A) ->
    case get(?ATOM_TEXTS) of
        #{A := Text} ->
            Text;
        undefined ->
            atom_text1(A);
        Texts ->
            Text = iolist_to_binary(atom_text1(A)),
            _ = put(?ATOM_TEXTS, Texts#{A => Text}),
            Text
    end.

atom_text1(A) ->
    Name = atom_to_binary(A),
    case unquoted(Name) andalso not reserved(A) of
        true -> Name;
        false -> [$', [char_esc(C, $') || C <- unicode:characters_to_list(Name)], $']
    end.

atom_name(A) -> atom_to_binary(A).

unquoted(<<C, Rest/binary>>) when C >= $a, C =< $z -> name_chars(Rest);
unquoted(<<C/utf8, Rest/binary>>) when C >= 16#DF, C =< 16#FF, C =/= 16#F7 -> name_chars(Rest);
unquoted(_) -> false.

name_chars(<<>>) -> true;
name_chars(<<C, Rest/binary>>) when C >= $a, C =< $z; C >= $A, C =< $Z; C >= $0, C =< $9;
                                    C =:= $_; C =:= $@ ->
    name_chars(Rest);
name_chars(<<C/utf8, Rest/binary>>) when C >= 16#C0, C =< 16#FF, C =/= 16#D7, C =/= 16#F7 ->
    name_chars(Rest);
name_chars(_) -> false.

reserved('after') -> true;
reserved('and') -> true;
reserved('andalso') -> true;
reserved('band') -> true;
reserved('begin') -> true;
reserved('bnot') -> true;
reserved('bor') -> true;
reserved('bsl') -> true;
reserved('bsr') -> true;
reserved('bxor') -> true;
reserved('case') -> true;
reserved('catch') -> true;
reserved('cond') -> true;
reserved('div') -> true;
reserved('else') -> true;
reserved('end') -> true;
reserved('fun') -> true;
reserved('if') -> true;
reserved('let') -> true;
reserved('maybe') -> true;
reserved('not') -> true;
reserved('of') -> true;
reserved('or') -> true;
reserved('orelse') -> true;
reserved('receive') -> true;
reserved('rem') -> true;
reserved('try') -> true;
reserved('when') -> true;
reserved('xor') -> true;
reserved(_) -> false.

%% EXPORTS.md 1.2: float_to_list(F, [short]) is that rule.
float_text(F) ->
    list_to_binary(float_to_list(F, [short])).
