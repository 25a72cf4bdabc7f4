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
%% `send', `receive', `running', `garbage_collection' and `procs' flags
%% and ask for the return or exception (`{exception_trace}'): from then on
%% the process reports its calls (and where each returns to,
%% `return_to'), messages, scheduling, collections and process events (its
%% exit ends a call it was in: unfinished). Nothing turns them off at the return (a
%% match specification runs at a call, never at a return), so a process
%% that has called the spec once keeps reporting until the trace ends:
%% what falls between its calls of the spec is counted (`outside') and
%% let go here.
-module(tracekit_slow).

-export([plan/3, new/1, event/3, finish/1, counters/1, write/3]).

-export_type([state/0, capture/0]).

%% One process's open call of the spec: the function, how deep calls of
%% it are nested, when it began (us), whether it is looked at (sampling),
%% and what it kept (newest first) and left out.
-record(call, {mfa :: mfa(),
               depth = 1 :: pos_integer(),
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
               seen = 0 :: non_neg_integer(),
               counters = #{calls => 0, looked_at => 0, fast => 0, kept => 0,
                            unfinished => 0, exited => 0, outside => 0, cut => 0}
                   :: #{atom() => non_neg_integer()}}).

%% The open calls together hold at most this many times max_bytes.
-define(HELD, 8).

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
             {exception_trace}],
    #{procs => [{Procs, [call, return_to, silent, timestamp]}],
      %% Every function first, then the spec's own patterns over them.
      calls => [{{'_', '_', '_'}, true, local}
                | [{MFA, [{Head, Guard, Start} || {Head, Guard, _} <- MS], Scope}
                   || {MFA, MS} <- Calls]],
      seq_trace => false}.

%% @doc A capture state: `patterns' (the spec's `{M, F, A}', `_' for
%% any), `over' (us), `sample' (look at every Nth call), `max_bytes'
%% (of the events one call keeps, by their external size).
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
            case matches(MFA, S#slow.patterns) of
                true ->
                    Look = Seen rem N =:= 0,
                    S1 = count(calls, S#slow{seen = Seen + 1}),
                    {C, S2} = add(E, #call{mfa = MFA, start = T, node = Node, look = Look}, S1),
                    {[], (count_if(Look, looked_at, S2))#slow{open = (S2#slow.open)#{Pid => C}}};
                false ->
                    {[], count(outside, S)}
            end;
        error ->
            {[], count(outside, S)}
    end.

%% An event of a process inside a call of the spec.
inside(Tag, E, T, Pid, #call{mfa = MFA, depth = D} = C, S0) ->
    Own = mfa(element(4, E)) =:= {ok, MFA},
    {C1, S} = add(E, C, S0),
    if
        Tag =:= call, Own ->
            {[], keep(Pid, C1#call{depth = D + 1}, S)};
        (Tag =:= return_from orelse Tag =:= exception_from), Own, D > 1 ->
            {[], keep(Pid, C1#call{depth = D - 1}, S)};
        (Tag =:= return_from orelse Tag =:= exception_from), Own ->
            ended(Tag, T, Pid, C1, S#slow{open = maps:remove(Pid, S#slow.open),
                                          held = S#slow.held - C1#call.bytes});
        Tag =:= exit ->
            %% Killed during the call: it never ends.
            S1 = S#slow{open = maps:remove(Pid, S#slow.open), held = S#slow.held - C1#call.bytes},
            {[], count_if(C#call.look, exited, count_if(C#call.look, unfinished, S1))};
        true ->
            {[], keep(Pid, C1, S)}
    end.

keep(Pid, C, S) ->
    S#slow{open = (S#slow.open)#{Pid => C}}.

ended(_Tag, _T, _Pid, #call{look = false}, S) ->
    {[], S};
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
    Size = erlang:external_size(E),
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

%% @doc The trace ended: calls still open are unfinished.
-spec finish(state()) -> state().
finish(#slow{open = Open} = S) ->
    N = length([C || #call{look = true} = C <- maps:values(Open)]),
    S#slow{open = #{}, held = 0, counters = maps:update_with(unfinished, fun(X) -> X + N end,
                                                   S#slow.counters)}.

%% @doc calls (of the spec, outermost), looked_at (after sampling), fast,
%% kept, unfinished (never ended: open at the end of the trace, or their
%% process exited, `exited'), outside (events of traced processes outside
%% any call of the spec), cut (events left out of kept calls past
%% max_bytes).
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
