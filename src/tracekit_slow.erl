%% @private
%% @doc The calls that {@link tracekit:slow/2} keeps: from the events of a
%% trace (every node's, merged by time), per process, the events between
%% the call of a function of the spec and its return or exception (the
%% outermost such call: one inside it is part of it); a call that took at
%% least the threshold, or raised, is kept whole and written out as a
%% trace file and a report page; the rest is let go.
%%
%% How the VM is asked for those events (`plan/3'): every traced process
%% has the `call', `return_to' and `silent' flags, and every function a
%% pattern with no action. A silent process makes no call events, so until
%% it calls a function of the spec it only pays the VM's check at each
%% call. The spec's patterns turn silence off, turn on the process's
%% `send', `receive', `running', `garbage_collection' and `procs' flags,
%% put where the call was made from in its event (`{message, {caller}}')
%% and ask for the return or exception (`{exception_trace}'): from then on
%% the process reports its calls (and where each returns to,
%% `return_to'), messages, scheduling, collections and process events (its
%% exit ends a call it was in: unfinished). Nothing turns them off at the return (a
%% match specification runs at a call, never at a return), so a process
%% that has called the spec once keeps reporting until the trace ends:
%% what falls between its calls of the spec is counted (`outside') and
%% let go here.
-module(tracekit_slow).

-export([plan/3, new/1, event/3, lost/2, finish/1, counters/1, write/3]).

-export_type([state/0, capture/0]).

%% One process's open call of the spec: the function, how deep calls of
%% it are nested, when it began (us), whether it is looked at (sampling),
%% and what it kept (newest first) and left out.
-record(call, {mfa :: mfa(),
               depth = 1 :: pos_integer(),
               %% Where the call returns to (the match specification's
               %% {caller}), and the functions called since (newest first,
               %% at most STACK of them, then `lost'): a return_to the
               %% caller while none of the calls made since is it says
               %% that the call ended and its return was lost.
               caller = undefined :: mfa() | undefined,
               stack = [] :: [mfa()] | lost | past,
               stack_n = 0 :: non_neg_integer(),
               start :: integer(),
               node :: node(),
               look :: boolean(),
               events = [] :: [tuple()],
               n = 0 :: non_neg_integer(),
               bytes = 0 :: non_neg_integer(),
               cut = 0 :: non_neg_integer()}).

-record(slow, {patterns :: [{module() | '_', atom() | '_', arity() | '_'}],
               over :: non_neg_integer(),
               sample :: pos_integer(),
               max_bytes :: pos_integer(),
               %% Bytes of the events all open calls hold, and the most
               %% they may (HELD times max_bytes): many processes in slow
               %% calls at once keep the memory bounded.
               held = 0 :: non_neg_integer(),
               max_held :: pos_integer(),
               open = #{} :: #{pid() => #call{}},
               %% Nodes whose rings refused events in the batch being taken.
               suspect = #{} :: #{node() => true},
               seen = 0 :: non_neg_integer(),
               counters = #{calls => 0, looked_at => 0, fast => 0, kept => 0,
                            unfinished => 0, exited => 0, broken => 0, outside => 0,
                            cut => 0}
                   :: #{atom() => non_neg_integer()}}).

%% The open calls together hold at most this many times max_bytes.
-define(HELD, 8).
%% The most calls a call's stack follows.
-define(STACK, 100000).

-opaque state() :: #slow{}.
%% A kept call: its process and node, the function, when it began (us
%% since the epoch), how long it took (us), how it ended, its events (in
%% order) and the events left out past `max_bytes'.
-type capture() :: #{pid := pid(), node := node(), mfa := mfa(), start := integer(),
                     duration := non_neg_integer(), result := return | exception,
                     events := [tuple()], cut := non_neg_integer()}.

%% @doc What the nodes trace for calls of `MFAs' (with their match
%% specifications' heads and guards) made by `Procs' (see the module doc).
-spec plan(term(), [{term(), [tuple()]}], local | global) -> tracekit_proto:what().
plan(Procs, Calls, Scope) ->
    Start = [{silent, false},
             {trace, [], [send, 'receive', running, garbage_collection, procs]},
             {message, {caller}},
             {exception_trace}],
    #{procs => [{Procs, [call, return_to, silent, timestamp]}],
      %% Every function first, then the spec's own patterns over them.
      calls => [{{'_', '_', '_'}, true, local}
                | [{MFA, [{Head, Guard, Start} || {Head, Guard, _} <- MS], Scope}
                   || {MFA, MS} <- Calls]],
      seq_trace => false}.

%% @doc A capture state: `patterns' (the spec's `{M, F, A}', `_' for
%% any), `over' (us), `sample' (look at every Nth call), `max_bytes'
%% (of the events one call keeps, by the larger of their external size
%% and their size on the heap).
-spec new(#{patterns := [tuple()], over := non_neg_integer(), sample := pos_integer(),
            max_bytes := pos_integer()}) -> state().
new(#{patterns := Ps, over := Over, sample := N, max_bytes := Max}) ->
    #slow{patterns = Ps, over = Over, sample = N, max_bytes = Max, max_held = ?HELD * Max}.

%% @doc One event (its time in us, and its node): the calls it ends that
%% are kept come out, in the order they ended.
-spec event(tuple(), {integer(), node()}, state()) -> {[capture()], state()}.
event(E, {T, Node}, #slow{open = Open} = S) when tuple_size(E) >= 4 ->
    Pid = element(2, E),
    Tag = element(3, E),
    case Open of
        #{Pid := C} -> inside(Tag, E, T, Pid, C, S);
        #{} when Tag =:= call -> maybe_start(E, T, Node, Pid, S);
        #{} -> {[], count(outside, S)}
    end;
event(_E, _At, S) ->
    {[], count(outside, S)}.

maybe_start(E, T, Node, Pid, #slow{seen = Seen, sample = N} = S) ->
    case mfa(element(4, E)) of
        {ok, MFA} ->
            Caller = case E of
                         {trace_ts, _, call, _, {_, _, _} = CMFA, _} -> CMFA;
                         _ -> undefined
                     end,
            %% Called from a function of the spec: a call inside one whose
            %% start was let go (broken), not an outermost one.
            Nested = Caller =/= undefined andalso matches(Caller, S#slow.patterns),
            case matches(MFA, S#slow.patterns) andalso not Nested of
                true ->
                    Look = Seen rem N =:= 0,
                    S1 = count(calls, S#slow{seen = Seen + 1}),
                    {C, S2} = add(E, #call{mfa = MFA, start = T, node = Node, look = Look,
                                           caller = Caller, stack = [MFA], stack_n = 1}, S1),
                    {[], (count_if(Look, looked_at, S2))#slow{open = (S2#slow.open)#{Pid => C}}};
                false ->
                    {[], count(outside, S)}
            end;
        error ->
            {[], count(outside, S)}
    end.

%% An event of a process inside a call of the spec.
inside(Tag, E, T, Pid, #call{mfa = MFA, depth = D} = C0, S0) ->
    Own = mfa(element(4, E)) =:= {ok, MFA},
    C = follow(Tag, E, C0),
    {C1, S} = add(E, C, S0),
    if
        C#call.stack =:= past ->
            %% Returned to where the call was made from: it ended, and
            %% its return was lost.
            {[], count_if(C#call.look, broken, close(Pid, C1, S))};
        Tag =:= call, Own ->
            {[], keep(Pid, C1#call{depth = D + 1}, S)};
        (Tag =:= return_from orelse Tag =:= exception_from), Own, D > 1 ->
            {[], keep(Pid, C1#call{depth = D - 1}, S)};
        (Tag =:= return_from orelse Tag =:= exception_from), Own ->
            ended(Tag, T, Pid, C1, close(Pid, C1, S));
        Tag =:= exit ->
            %% Killed during the call: it never ends.
            {[], count_if(C#call.look, exited,
                          count_if(C#call.look, unfinished, close(Pid, C1, S)))};
        true ->
            {[], keep(Pid, C1, S)}
    end.

%% The calls made since the call of the spec, as call and return_to
%% events tell them; `past' when execution went back to the caller.
follow(_Tag, _E, #call{stack = lost} = C) ->
    C;
follow(call, E, #call{stack = St, stack_n = N} = C) when N < ?STACK ->
    case mfa(element(4, E)) of
        {ok, X} -> C#call{stack = [X | St], stack_n = N + 1};
        error -> C
    end;
follow(call, _E, C) ->
    C#call{stack = lost};
follow(return_to, E, #call{stack = St, caller = Caller} = C) ->
    X = element(4, E),
    case lists:member(X, St) of
        true ->
            {Left, N} = pop_to(X, St, C#call.stack_n),
            C#call{stack = Left, stack_n = N};
        false when X =:= Caller, Caller =/= undefined ->
            C#call{stack = past};
        false ->
            %% Into a function with no pattern (its module loaded later).
            C
    end;
follow(_Tag, _E, C) ->
    C.

pop_to(X, [X | _] = St, N) -> {St, N};
pop_to(X, [_ | St], N) -> pop_to(X, St, N - 1).

%% The call of Pid ends: what it held is let go.
close(Pid, #call{bytes = B}, S) ->
    S#slow{open = maps:remove(Pid, S#slow.open), held = S#slow.held - B}.

keep(Pid, C, S) ->
    S#slow{open = (S#slow.open)#{Pid => C}}.

ended(_Tag, _T, _Pid, #call{look = false}, S) ->
    {[], S};
ended(_Tag, _T, _Pid, #call{node = Node}, #slow{suspect = Suspect} = S)
  when is_map_key(Node, Suspect) ->
    {[], count(broken, S)};
ended(Tag, T, Pid, #call{start = T0} = C, #slow{over = Over} = S) ->
    Duration = T - T0,
    case Duration >= Over orelse Tag =:= exception_from of
        true ->
            Capture = #{pid => Pid, node => C#call.node, mfa => C#call.mfa, start => T0,
                        duration => Duration,
                        result => case Tag of return_from -> return; _ -> exception end,
                        events => lists:reverse(C#call.events), cut => C#call.cut},
            S1 = count(kept, S),
            {[Capture], S1#slow{counters = maps:update_with(cut, fun(N) -> N + C#call.cut end,
                                                            S1#slow.counters)}};
        false ->
            {[], count(fast, S)}
    end.

%% An event into a looked-at call, while the call stays within max_bytes
%% and all open calls within max_held: a call keeps its first events,
%% and once one is left out, only the return or exception that ends it.
%% (Its call is always kept, as is that end.)
add(_E, #call{look = false} = C, S) ->
    {C, S};
add(E, #call{bytes = B, n = N, cut = Cut} = C,
    #slow{max_bytes = Max, held = Held, max_held = MaxHeld} = S) ->
    Size = held_size(E),
    Ends = element(3, E) =:= return_from orelse element(3, E) =:= exception_from,
    case N =:= 0
        orelse (Cut =:= 0 andalso B + Size =< Max andalso Held + Size =< MaxHeld)
        orelse (Ends andalso mfa(element(4, E)) =:= {ok, C#call.mfa}
                andalso C#call.depth =:= 1) of
        true ->
            {C#call{events = [E | C#call.events], n = C#call.n + 1, bytes = B + Size},
             S#slow{held = Held + Size}};
        false ->
            {C#call{cut = C#call.cut + 1}, S}
    end.

%% @doc A batch of events is about to be taken in (`Nodes': the nodes
%% whose rings refused events since the last batch), or was (`done'). The
%% refused events came before the end of this batch: a call open on such
%% a node, or that ends on it within this batch, may miss some (a lost
%% return would leave a call open for good, and every later call of its
%% process inside it). Such calls are let go as `broken', at the start of
%% the batch, within it and at its end; each process starts afresh at its
%% next call of the spec.
-spec lost([node()] | done, state()) -> state().
lost(done, #slow{suspect = Suspect} = S) ->
    (lists:foldl(fun broken/2, S, maps:keys(Suspect)))#slow{suspect = #{}};
lost(Nodes, S) ->
    (lists:foldl(fun broken/2, S, Nodes))#slow{suspect = maps:from_keys(Nodes, true)}.

broken(Node, #slow{open = Open} = S) ->
    {Gone, Kept} = maps:fold(fun(Pid, #call{node = N} = C, {G, K}) when N =:= Node ->
                                     {[C | G], maps:remove(Pid, K)};
                                (_, _, Acc) ->
                                     Acc
                             end, {[], Open}, Open),
    Looked = length([C || #call{look = true} = C <- Gone]),
    S#slow{open = Kept, held = S#slow.held - lists:sum([B || #call{bytes = B} <- Gone]),
           counters = maps:update_with(broken, fun(X) -> X + Looked end, S#slow.counters)}.

%% @doc The trace ended: calls still open are unfinished.
-spec finish(state()) -> state().
finish(#slow{open = Open} = S) ->
    N = length([C || #call{look = true} = C <- maps:values(Open)]),
    S#slow{open = #{}, held = 0, counters = maps:update_with(unfinished, fun(X) -> X + N end,
                                                   S#slow.counters)}.

%% @doc calls (of the spec, outermost), looked_at (after sampling), fast,
%% kept, unfinished (never ended: open at the end of the trace, or their
%% process exited, `exited'), broken (let go when their node's ring
%% refused events), outside (events of traced processes outside any call
%% of the spec), cut (events left out of kept calls past max_bytes).
-spec counters(state()) -> #{atom() => non_neg_integer()}.
counters(#slow{counters = C}) ->
    C.

%%% Writing a kept call -------------------------------------------------------

%% @doc Writes capture `N' into `Dir': `slow-N.tkt' (a trace file of its
%% events, each with the time the VM gave it: {@link tracekit_file}) and
%% `slow-N.html' (its report page: the calls as nested bars on a time
%% axis, the messages as a sequence diagram, {@link tracekit_report}).
%% Returns the files, or the first error.
-spec write(capture(), pos_integer(), file:filename_all()) ->
          {ok, #{file := file:filename_all(), report := file:filename_all()}}
              | {error, term()}.
write(#{events := Events} = Capture, N, Dir) ->
    %% Dir is any file:filename_all() (a binary too): the names are joined
    %% to it, never appended to what the join made.
    Name = "slow-" ++ integer_to_list(N),
    File = filename:join(Dir, Name ++ ".tkt"),
    Report = filename:join(Dir, Name ++ ".html"),
    maybe
        ok ?= trace_file(File, Events),
        {ok, _} ?= tracekit_report:write(Events, Report,
                                         #{title => title(Capture),
                                           note => note(Capture)}),
        {ok, #{file => File, report => Report}}
    end.

trace_file(Path, Events) ->
    case tracekit_file:new(#{path => Path}) of
        {ok, F} ->
            lists:foreach(fun(E) -> record(F, E) end, Events),
            tracekit_file:close(F);
        {error, _} = E ->
            E
    end.

%% An event as the VM gave it to the tracer: {trace_ts, Pid, Tag, Msg,
%% [Extra,] Ts} (the plan asks for no scheduler ids nor match spec
%% results), recorded with its own time.
record(F, E) ->
    [trace_ts, Pid, Tag, Msg | Rest] = tuple_to_list(E),
    {Extra, Ts} = case Rest of
                      [X, T] -> {#{extra => X}, T};
                      [T] -> {#{}, T}
                  end,
    tracekit_file:trace(Tag, F, Pid, Msg, Extra#{timestamp => {timestamp, Ts}}).

title(#{mfa := {M, F, A}, duration := D}) ->
    io_lib:format("~w:~w/~w took ~ts", [M, F, A, tracekit_latency_view:duration(D)]).

note(#{pid := Pid, node := Node, result := R, events := Es, cut := Cut}) ->
    io_lib:format("~w on ~w, ~w; ~w events~ts", [Pid, Node, R, length(Es),
                                                 case Cut of
                                                     0 -> "";
                                                     _ -> io_lib:format(" (~w more left out past "
                                                                        "max_bytes)", [Cut])
                                                 end]).

%%% Helpers -------------------------------------------------------------------

%% What an event held costs: its size on the trace process's heap, or its
%% external size when that is larger (a list of [] or of small integers
%% takes up to 16 times more room on the heap than outside: counted
%% outside only, max_bytes held 16 times as much).
held_size(E) ->
    max(erlang:external_size(E), erts_debug:flat_size(E) * erlang:system_info(wordsize)).

mfa({M, F, Args}) when is_atom(M), is_atom(F), is_list(Args) -> {ok, {M, F, length(Args)}};
mfa({M, F, A}) when is_atom(M), is_atom(F), is_integer(A) -> {ok, {M, F, A}};
mfa(_) -> error.

matches({M, F, A}, Patterns) ->
    lists:any(fun({PM, PF, PA}) ->
                      (PM =:= '_' orelse PM =:= M) andalso (PF =:= '_' orelse PF =:= F)
                          andalso (PA =:= '_' orelse PA =:= A)
              end, Patterns).

count(K, #slow{counters = C} = S) ->
    S#slow{counters = maps:update_with(K, fun(N) -> N + 1 end, C)}.

count_if(true, K, S) -> count(K, S);
count_if(false, _K, S) -> S.
