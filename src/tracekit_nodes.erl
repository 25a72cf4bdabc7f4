%% @private
%% @doc The nodes of a trace: every node traced, the calling node's own
%% included, has an agent ({@link tracekit_agent}) that owns its session
%% and sink; this module, run by the trace's process, checks the nodes,
%% starts their agents, pulls their events and merges them by time, and
%% at the end closes them and fetches their trace files. The messages
%% are those of {@link tracekit_proto}.
%%
%% Time. Each node's events carry its own clock. At start the offset of
%% each node's clock is measured (the best of five round trips: the error
%% is at most half of that round trip; 0 for the calling node), and an
%% event's time is its timestamp less the offset of its node. An agent
%% answers with its horizon: every event it drains later comes after it.
%% An event goes out of the merge only when every other node has an event
%% after it in hand, or a horizon a margin past it, or is finished: so the
%% merged stream is in time order across nodes (as exact as the offsets),
%% and exactly in each node's own order for its events. The receipt of a
%% message whose send (from another node traced) is in hand waits for
%% that send.
%%
%% A node that does not answer within {@link late_ms()} is late: the
%% merge goes on without waiting for it. What it hands over later that is
%% older than what the merge already let go is counted as dropped
%% (`late'), never shown out of order. Every event a node recorded is
%% shown, or counted in its summary.
%%
%% The state is driven by the trace's process: {@link request/1} asks
%% every agent that has no question open for a batch, {@link handle/2}
%% takes in what comes back (that process receives it), {@link take/1}
%% hands out what the merge can let go.
-module(tracekit_nodes).

-export([start/2, request/1, handle/2, take/1, close/1, finished/1, done/1,
         summary/1, fetch/2, offsets/1, names/1, event_time/1, late_ms/0, latency/1]).

-export_type([nodes/0, options/0, node_summary/0]).

-define(CALL_MS, 10000).
-define(PROTOCOL, (tracekit_proto:version())).
%% A node whose question has been open this long is late.
-define(LATE_MS, 2000).
%% Bytes of a trace file fetched per request.
-define(PIECE, 1 bsl 20).
%% Tries, 200 ms apart, at starting on a node that just connected (its
%% code path may not be set yet).
-define(JOIN_TRIES, 5).
%% Tries, RECONNECT_MS apart, at fetching the file of a node whose
%% connection was lost (about 10 s: the agent keeps the file 60 s).
-define(RECONNECT_TRIES, 33).
-define(RECONNECT_MS, 300).

-record(node, {name :: node(),
               agent :: pid(),
               mon :: reference(),
               offset = 0 :: integer(),           % its clock less ours, us
               error = 0 :: non_neg_integer(),    % how wrong offset may be, us
               queue = queue:new() :: queue:queue({integer(), tuple()}),
               horizon = undefined :: undefined | integer() | closed,
               pending = undefined :: undefined | {reference(), integer()},
               close_ref = undefined :: undefined | reference(),
               ready_at = now :: now | integer(), % ask again from then (ms)
               %% closing: asked to close; closed: it answered (its last
               %% events may still come); drained: every event is here.
               state = tracing :: tracing | closing | closed | drained | down,
               late = false :: boolean(),
               %% The time of its last event handed out.
               mark = undefined :: undefined | integer(),
               counters = #{} :: map(),
               %% Its latest histograms (a latency trace).
               latency = undefined :: undefined | tracekit_latency:snapshot(),
               late_dropped = 0 :: non_neg_integer(),
               why = undefined :: term()}).

%% `nodes': the nodes to trace (the calling node's name among them or
%% not); `bad_node': `fail' (default) refuses the whole trace when a node
%% cannot take part, `skip' leaves it out (said in the summary); `follow':
%% also trace on every node that connects while the trace runs; `file': a
%% directory, where each node's trace file ends up.
-type options() :: #{nodes := [node()], bad_node => fail | skip, follow => boolean(),
                     file => file:name_all()}.

-record(nodes, {nodes = #{} :: #{node() => #node{}},
                %% The plan, with each node's processes still to pick.
                plan :: map(),
                opts :: options(),
                failed = #{} :: #{node() => string()},
                %% Messages sent to a process of another node traced,
                %% in hand and not handed out yet, by what their receipt
                %% shows of them (send_key/2) => how many.
                sends = #{} :: #{send_key() => pos_integer()},
                %% How far past an event every node's horizon must be
                %% before it goes out: twice the clocks' error, so that
                %% the send of a message received is in hand.
                margin = 100 :: non_neg_integer(),
                %% Registered names of the nodes' processes, as their
                %% agents found them.
                names = #{} :: #{pid() => atom()}}).

-opaque nodes() :: #nodes{}.
%% A message between nodes as both its send and its receipt show it: to
%% whom and what (process tracing), or seq_trace's label, serial, sender
%% and message (seq_trace names the receiver as the sender wrote it: a
%% registered name, say).
-type send_key() :: {pid(), term()} | {seq, term(), term(), pid(), term()}.
-type node_summary() :: #{state := closed | {down, term()} | {late, string()}
                                  | {failed, string()},
                          lost := non_neg_integer(), late := non_neg_integer(),
                          counters := map()}.

%%% Start ---------------------------------------------------------------------

%% @doc Checks every node, then starts an agent on each: unless `bad_node'
%% is `skip', nothing is traced anywhere unless every node can take its
%% part (`{error, {bad_node, Node, Why}}', Why a sentence). The plan's
%% processes may be pids of any of the nodes and registered names (looked
%% up on every node); its `exclude' are processes of the calling node.
%% (The plan: a tracekit_proto:what() with its sink and exclude.)
-spec start(map(), options()) -> {ok, nodes()} | {error, term()}.
start(Plan, #{nodes := Nodes0} = Opts) ->
    Nodes = lists:usort(Nodes0),
    Kind = maps:get(kind, maps:get(sink, Plan)),
    Skip = maps:get(bad_node, Opts, fail) =:= skip,
    _ = [ok = net_kernel:monitor_nodes(true) || maps:get(follow, Opts, false)],
    maybe
        {ok, Good, Failed} ?= check_all(Nodes, Kind, Skip),
        {ok, Procs} ?= procs_per_node(maps:get(procs, Plan), Good, Good),
        Offsets = [{N, offset(N)} || N <- Good],
        E0 = #nodes{plan = Plan, opts = Opts, failed = Failed},
        start_agents(Offsets, Procs, Skip, E0)
    end.

check_all(Nodes, Kind, Skip) ->
    lists:foldl(fun(N, {ok, Good, Failed}) ->
                        case check(N, Kind) of
                            ok -> {ok, Good ++ [N], Failed};
                            {error, Why} when Skip -> {ok, Good, Failed#{N => Why}};
                            {error, Why} -> {error, {bad_node, N, Why}}
                        end;
                   (_, Error) ->
                        Error
                end, {ok, [], #{}}, Nodes).

%% Whether a node can take its part: connected, speaking this node's
%% protocol, its tracer modules loading.
check(N, Kind) when N =:= node() ->
    loads(tracekit_proto:hello(Kind));
check(N, Kind) ->
    %% A hidden node (a remote shell's, say) is connected too.
    case lists:member(N, nodes(connected)) of
        false ->
            {error, "not connected to this node (connect it first, for example "
                    "with net_adm:ping/1)"};
        true ->
            try erpc:call(N, tracekit_proto, hello, [Kind], ?CALL_MS) of
                #{protocol := P} = Hello ->
                    case P =:= ?PROTOCOL of
                        true -> loads(Hello);
                        false -> {error, protocol(P)}
                    end;
                Other ->
                    {error, text("it answered ~0tP, not a tracekit node's hello", [Other, 5])}
            catch
                error:{exception, undef, [{tracekit_proto, hello, _, _} | _]} ->
                    old_or_missing(N, Kind);
                error:{erpc, Why} ->
                    {error, text("no answer (~0tp)", [Why])};
                Class:Why ->
                    {error, text("the check failed: ~w:~0tP", [Class, Why, 10])}
            end
    end.

loads(#{loads := ok}) -> ok;
loads(#{loads := {error, Why}}) -> {error, Why}.

protocol(P) ->
    text("it runs tracekit of protocol ~w, this node protocol ~w: load the same "
         "tracekit on every node", [P, ?PROTOCOL]).

%% A node without tracekit_proto: an older tracekit (protocol 1), or none:
%% then tracekit is lent to it, for this trace.
old_or_missing(N, Kind) ->
    try erpc:call(N, code, which, [tracekit_agent], ?CALL_MS) of
        non_existing ->
            case tracekit_push:push(N, self()) of
                ok -> check(N, Kind);
                {error, _} = E -> E
            end;
        _ ->
            {error, protocol(1)}
    catch
        _:_ -> {error, "tracekit is not loaded there"}
    end.

text(Fmt, Args) -> lists:flatten(io_lib:format(Fmt, Args)).

%% Each {Who, Flags} of the plan for each node of For: all, new, existing
%% the same on every node; pids on their own node; names on every node
%% where they are registered (Nodes: all the nodes traced).
procs_per_node(Procs, For, Nodes) ->
    try
        {ok, maps:from_list([{N, [{who(Who, N, Nodes), Flags} || {Who, Flags} <- Procs]}
                             || N <- For])}
    catch
        throw:{bad_process, _, _} = E -> {error, E}
    end.

who(W, _N, _Nodes) when W =:= all; W =:= new; W =:= existing ->
    W;
who(L, N, Nodes) when is_list(L) ->
    lists:usort([P || X <- L, P <- pids_of(X, Nodes), node(P) =:= N]).

pids_of(P, Nodes) when is_pid(P) ->
    case lists:member(node(P), Nodes) of
        true -> [P];
        false -> throw({bad_process, P, "its node is not one of the nodes traced"})
    end;
pids_of(Name, Nodes) when is_atom(Name) ->
    case [P || N <- Nodes, P <- [whereis_on(N, Name)], is_pid(P)] of
        [] -> throw({bad_process, Name, text("no process is registered as ~tw on the "
                                             "nodes traced", [Name])});
        Ps -> Ps
    end.

whereis_on(N, Name) when N =:= node() -> whereis(Name);
whereis_on(N, Name) ->
    try erpc:call(N, erlang, whereis, [Name], ?CALL_MS)
    catch _:_ -> undefined
    end.

start_agents([], _Procs, _Skip, #nodes{nodes = Ns} = E) ->
    Err = lists:max([0 | [Er || #node{error = Er} <- maps:values(Ns)]]),
    {ok, E#nodes{margin = 2 * Err + 100}};
start_agents([{N, {Offset, Err}} | Rest], Procs, Skip, E) ->
    case start_agent(N, node_plan(N, maps:get(N, Procs), E)) of
        {ok, Agent} ->
            Node = #node{name = N, agent = Agent, mon = monitor(process, Agent),
                         offset = Offset, error = Err},
            start_agents(Rest, Procs, Skip, E#nodes{nodes = (E#nodes.nodes)#{N => Node}});
        {error, {bad_process, _, _} = Why} ->
            done(close(E)),
            {error, Why};
        {error, {Kind, _, _} = Why} when N =:= node(), Kind =:= file ->
            %% This node's file: as the file option's error.
            done(close(E)),
            {error, Why};
        {error, {badopt, _} = Why} when N =:= node() ->
            %% An option this node's sink refused: as that option's error.
            done(close(E)),
            {error, Why};
        {error, Why} when Skip ->
            start_agents(Rest, Procs, Skip,
                         E#nodes{failed = (E#nodes.failed)#{N => start_error(Why)}});
        {error, Why} ->
            done(close(E)),
            {error, {bad_node, N, start_error(Why)}}
    end.

%% Why a node could not start tracing, as a sentence.
start_error({file, Path, Posix}) ->
    text("cannot create the trace file ~ts there: ~ts (~w)",
         [Path, file:format_error(Posix), Posix]);
start_error({private_dir, Dir, Posix}) ->
    text("cannot make a private directory for its trace file in ~ts: ~ts (~w)",
         [Dir, file:format_error(Posix), Posix]);
start_error({badopt, O}) ->
    text("the ring cannot be made there with ~0tP (see tracekit_ring:limits/0)", [O, 10]);
start_error({agent_failed, Why}) ->
    text("tracing could not start there: ~0tP", [Why, 10]);
start_error({erpc, Why}) ->
    text("no answer (~0tp)", [Why]);
start_error(Why) ->
    text("tracing could not start there: ~0tP", [Why, 10]).

start_agent(N, Plan) when N =:= node() ->
    tracekit_agent:start(self(), Plan);
start_agent(N, Plan) ->
    try erpc:call(N, tracekit_agent, start, [self(), Plan], ?CALL_MS)
    catch
        error:{erpc, Why} -> {error, {erpc, Why}};
        Class:Why -> {error, {Class, Why}}
    end.

%% The plan of node N: its processes; the processes that print (those of
%% this node) left out here; its file where it belongs.
node_plan(N, Procs, #nodes{plan = #{sink := Sink} = Plan, opts = Opts}) ->
    Plan#{procs := Procs,
          exclude := case N =:= node() of
                         true -> maps:get(exclude, Plan);
                         false -> []
                     end,
          sink := case {Sink, Opts} of
                      {#{kind := file}, #{file := Dir}} when N =:= node() ->
                          Sink#{where => {path, in_dir(Dir, N)}};
                      {#{kind := file}, #{file := _}} ->
                          Sink#{where => temp};
                      _ ->
                          Sink
                  end}.

%% Node N's file in Dir. Dir may be a binary, or a deep list of
%% characters, atoms and binaries, which filename:join/2 does not take.
in_dir(Dir, N) when is_binary(Dir) ->
    filename:join(Dir, atom_to_list(N) ++ ".tkt");
in_dir(Dir, N) ->
    filename:join(unicode:characters_to_list(filename:flatten(Dir)), atom_to_list(N) ++ ".tkt").

%% The offset of N's clock against ours, from the quickest of five round
%% trips, and its error bound (half that round trip).
offset(N) when N =:= node() ->
    {0, 0};
offset(N) ->
    try
        {Rtt, Off} = lists:min([sample(N) || _ <- lists:seq(1, 5)]),
        {Off, (Rtt + 1) div 2}
    catch _:_ -> {0, 0}
    end.

sample(N) ->
    M0 = erlang:monotonic_time(microsecond),
    T0 = erlang:system_time(microsecond),
    There = erpc:call(N, erlang, system_time, [microsecond], ?CALL_MS),
    Rtt = erlang:monotonic_time(microsecond) - M0,
    {Rtt, There - (T0 + Rtt div 2)}.

%% A node that connected while the trace runs (with `follow').
join(N, Try, #nodes{nodes = Ns, plan = Plan} = E) when not is_map_key(N, Ns) ->
    Kind = maps:get(kind, maps:get(sink, Plan)),
    Result = maybe
                 ok ?= check(N, Kind),
                 {ok, #{N := Procs}} ?= procs_per_node(maps:get(procs, Plan), [N],
                                                       [N | maps:keys(Ns)]),
                 {Offset, Err} = offset(N),
                 {ok, Agent} ?= start_agent(N, node_plan(N, Procs, E)),
                 {ok, #node{name = N, agent = Agent, mon = monitor(process, Agent),
                            offset = Offset, error = Err}}
             end,
    case Result of
        {ok, Node} ->
            E#nodes{nodes = Ns#{N => Node}, failed = maps:remove(N, E#nodes.failed),
                    margin = max(E#nodes.margin, 2 * Node#node.error + 100)};
        _ when Try < ?JOIN_TRIES ->
            _ = erlang:send_after(200, self(), {?MODULE, join, N, Try + 1}),
            E;
        {error, {bad_process, _, Why}} ->
            E#nodes{failed = (E#nodes.failed)#{N => Why}};
        {error, Why} when is_list(Why) ->
            E#nodes{failed = (E#nodes.failed)#{N => Why}};
        {error, Why} ->
            E#nodes{failed = (E#nodes.failed)#{N => start_error(Why)}}
    end;
join(_N, _Try, E) ->
    E.

%% @doc Each node's clock offset and its error bound, in microseconds.
-spec offsets(nodes()) -> #{node() => {integer(), non_neg_integer()}}.
offsets(#nodes{nodes = Ns}) ->
    maps:map(fun(_, #node{offset = O, error = E}) -> {O, E} end, Ns).

%% @doc The registered names of the processes of the nodes that their
%% events mention.
-spec names(nodes()) -> #{pid() => atom()}.
names(#nodes{names = Names}) ->
    Names.

%% @doc The latest histograms of each node of a latency trace that has
%% sent some.
-spec latency(nodes()) -> #{node() => tracekit_latency:snapshot()}.
latency(#nodes{nodes = Ns}) ->
    maps:from_list([{Name, L} || #node{name = Name, latency = L} <- maps:values(Ns),
                                 L =/= undefined]).

%% @doc Milliseconds after which a node that has not answered is late.
-spec late_ms() -> pos_integer().
late_ms() -> ?LATE_MS.

%% @doc The time of an event in microseconds: its timestamp, or now for
%% one without.
-spec event_time(tuple()) -> integer().
event_time(E) ->
    case tracekit_proto:event_stamp(E) of
        none -> erlang:system_time(microsecond);
        T -> T
    end.

%%% Running -------------------------------------------------------------------

%% @doc Asks every agent that has no question open for its next batch (a
%% node whose last batch was not full is asked again a little later), and
%% marks as late the nodes that have not answered for too long.
-spec request(nodes()) -> nodes().
request(#nodes{nodes = Ns} = E) ->
    Now = erlang:monotonic_time(millisecond),
    E#nodes{nodes = maps:map(fun(_, N) -> ask(N, Now) end, Ns)}.

ask(#node{state = S, pending = undefined, agent = A, ready_at = R} = N, Now)
  when S =/= drained, S =/= down, R =:= now orelse Now >= R ->
    N#node{pending = {tracekit_proto:ask_more(A, tracekit_proto:batch()), Now}};
ask(#node{pending = {_, Asked}, late = false} = N, Now) when Now - Asked >= ?LATE_MS ->
    N#node{late = true};
ask(N, _Now) ->
    N.

%% @doc Takes in a message for the trace's nodes: an agent's answer, the
%% end of an agent (`{down, Node, Why, Nodes}': its node went down or
%% disconnected, or the agent failed), a node that connected (with
%% `follow'). `ignore' for other messages.
-spec handle(term(), nodes()) -> {ok, nodes()} | {down, node(), term(), nodes()} | ignore.
handle({'DOWN', Mon, process, A, Why}, E) ->
    case by_agent(A, E) of
        #node{mon = Mon, state = drained} = N ->
            {ok, put_node(N, E)};
        #node{mon = Mon, name = Name} = N ->
            {down, Name, Why, put_node(N#node{state = down, horizon = closed, late = false,
                                               pending = undefined, why = Why}, E)};
        _ ->
            ignore
    end;
handle({nodeup, N}, #nodes{opts = #{follow := true}} = E) ->
    {ok, join(N, 1, E)};
handle({?MODULE, join, N, Try}, E) ->
    {ok, join(N, Try, E)};
handle({nodedown, _}, #nodes{opts = #{follow := true}} = E) ->
    {ok, E};
handle(Msg, E) ->
    case tracekit_proto:reply(Msg) of
        {A, Ref, Answer} ->
            case by_agent(A, E) of
                #node{} = N -> {ok, answered(N, Ref, Answer, E)};
                false -> ignore
            end;
        no ->
            ignore
    end.

answered(#node{pending = {Ref, _}, late = Late} = N0, Ref, Answer, E) ->
    N = N0#node{pending = undefined, late = false},
    case Answer of
        {events, Es, H, Counters, Names} ->
            E1 = E#nodes{names = maps:merge(E#nodes.names, Names)},
            {Kept, N1} = events(N, Es, H, Counters, late_mark(Late, N, E1)),
            put_node(N1, note_sends(Kept, E1));
        {file, Counters} ->
            put_node(N#node{counters = Counters, ready_at = ready_at(0)}, E);
        {latency, #{counters := Counters} = Snap, H} ->
            %% Cumulative: the latest replaces the one before.
            Drained = H =:= closed andalso N#node.state =:= closed,
            put_node(N#node{latency = Snap, counters = Counters,
                            state = case Drained of true -> drained; false -> N#node.state end,
                            ready_at = erlang:monotonic_time(millisecond)
                                + tracekit_proto:latency_ms()}, E);
        _ ->
            put_node(N, E)
    end;
answered(#node{close_ref = Ref, counters = C0} = N, Ref, {closed, Counters}, E) ->
    %% Closed only on the answer to the close itself: its counters are the
    %% final ones (everything recorded is drained or written). A file has
    %% nothing more to hand over; a ring its last events.
    State = case sink_kind(E) of
                file -> drained;
                _ -> closed              % a ring's last events, or final histograms, to come
            end,
    put_node(N#node{state = State, close_ref = undefined, late = false,
                    ready_at = case sink_kind(E) of
                                   latency -> now;      % its final histograms
                                   _ -> N#node.ready_at
                               end,
                    counters = case State of
                                   drained -> Counters;
                                   closed -> maps:merge(C0, Counters)
                               end}, E);
answered(N, _Ref, _Answer, E) ->
    put_node(N, E).

%% What a node that was late hands over must not be older than what the
%% merge let go of the other nodes' events meanwhile.
late_mark(false, _N, _E) ->
    undefined;
late_mark(true, #node{name = Name}, #nodes{nodes = Ns}) ->
    case [M || #node{name = Other, mark = M} <- maps:values(Ns), Other =/= Name,
               is_integer(M)] of
        [] -> undefined;
        Marks -> lists:max(Marks)
    end.

%% A batch: its events queued with their times (those older than Mark
%% counted as late and left out), the node's horizon moved on.
events(#node{queue = Q, offset = Off, state = S} = N, Es, H, Counters, Mark) ->
    Timed = [{event_time(Ev) - Off, Ev} || Ev <- Es],
    {Kept, Late} = case Mark of
                       undefined -> {Timed, []};
                       _ -> lists:partition(fun({T, _}) -> T >= Mark end, Timed)
                   end,
    %% `last': the batch's last event, when it has a timestamp (one
    %% without is timed by its arrival here, which says nothing of what
    %% its node still holds).
    Horizon = case H of
                  closed -> closed;
                  last when Kept =:= [] -> N#node.horizon;
                  last ->
                      {T, Ev} = lists:last(Kept),
                      case tracekit_proto:event_stamp(Ev) of
                          none -> N#node.horizon;
                          _ -> T
                      end;
                  T -> T - Off
              end,
    {[Ev || {_, Ev} <- Kept],
     N#node{queue = queue:join(Q, queue:from_list(Kept)),
            horizon = Horizon,
            state = case H of closed when S =:= closed -> drained; _ -> S end,
            counters = Counters, late_dropped = N#node.late_dropped + length(Late),
            ready_at = ready_at(length(Es))}}.

ready_at(Len) ->
    case Len >= tracekit_proto:batch() of
        true -> now;
        false -> erlang:monotonic_time(millisecond) + tracekit_proto:idle_ms()
    end.

sink_kind(#nodes{plan = #{sink := #{kind := Kind}}}) ->
    Kind.

by_agent(A, #nodes{nodes = Ns}) ->
    case [N || #node{agent = Ag} = N <- maps:values(Ns), Ag =:= A] of
        [N] -> N;
        [] -> false
    end.

put_node(#node{name = Name} = N, #nodes{nodes = Ns} = E) ->
    E#nodes{nodes = Ns#{Name => N}}.

%% @doc The events the merge can let go now, in time order, each as
%% `{Node, Time, Event}' (Time: microseconds on the calling node's clock).
%%
%% Causal order of messages between nodes: the clocks are known only
%% within their error, which can be more than a message takes from one
%% node to another. So the receipt of a message whose send, from another
%% node, is in hand and not handed out waits for that send (matched by
%% receiver and message for process tracing, by label, serial, sender and
%% message for seq_trace); and an event goes out only when every node's
%% horizon is a margin past it, so that such a send is in hand.
-spec take(nodes()) -> {[{node(), integer(), tuple()}], nodes()}.
take(E) ->
    take(E, []).

take(#nodes{nodes = Ns} = E, Acc) ->
    Heads = lists:sort([{T, Name, Ev} || #node{name = Name, queue = Q} <- maps:values(Ns),
                                         {value, {T, Ev}} <- [queue:peek(Q)]]),
    Ready = [H || {_, _, Ev} = H <- Heads, not waits_for_send(Ev, E)],
    Next = case {Ready, Heads} of
               {[H | _], _} -> H;
               {[], [H | _]} -> H;   % (a cycle cannot be causal: by time)
               {[], []} -> none
           end,
    case Next of
        none ->
            {lists:reverse(Acc), E};
        {T, Name, Ev} ->
            case lists:all(fun(N) -> after_or_done(N, T, Name, E#nodes.margin) end,
                           maps:values(Ns)) of
                true ->
                    #node{queue = Q, mark = M} = N = maps:get(Name, Ns),
                    Mark = case M of undefined -> T; _ -> max(M, T) end,
                    E1 = put_node(N#node{queue = queue:drop(Q), mark = Mark}, E),
                    take(handed_out(Ev, E1), [{Name, T, Ev} | Acc]);
                false ->
                    {lists:reverse(Acc), E}
            end
    end.

%% Whether node N can have nothing before T that is not in hand.
after_or_done(#node{name = Name}, _T, Name, _Margin) -> true;
after_or_done(#node{late = true}, _T, _, _Margin) -> true;
after_or_done(#node{queue = Q, horizon = H}, T, _, Margin) ->
    not queue:is_empty(Q) orelse H =:= closed orelse (is_integer(H) andalso H >= T + Margin).

%% Sends to a process of another node traced, as a batch brings them.
note_sends(Es, #nodes{sends = Sends} = E) ->
    E#nodes{sends = lists:foldl(fun(Ev, Acc) ->
                                        case send_key(Ev, E) of
                                            none -> Acc;
                                            K -> maps:update_with(K, fun(V) -> V + 1 end, 1, Acc)
                                        end
                                end, Sends, Es)}.

handed_out(Ev, #nodes{sends = Sends} = E) ->
    case send_key(Ev, E) of
        none -> E;
        K ->
            case maps:get(K, Sends, 0) of
                V when V > 1 -> E#nodes{sends = Sends#{K := V - 1}};
                _ -> E#nodes{sends = maps:remove(K, Sends)}
            end
    end.

send_key(Ev, #nodes{nodes = Ns}) when element(1, Ev) =:= trace_ts orelse element(1, Ev) =:= trace,
                                       element(3, Ev) =:= send, tuple_size(Ev) >= 5 ->
    From = element(2, Ev),
    To = element(5, Ev),
    case is_pid(To) andalso is_pid(From) andalso node(To) =/= node(From)
        andalso is_map_key(node(To), Ns) of
        true -> {To, element(4, Ev)};
        false -> none
    end;
send_key(Ev, #nodes{nodes = Ns}) when element(1, Ev) =:= seq_trace, tuple_size(Ev) >= 3 ->
    case element(3, Ev) of
        {send, Serial, From, To, Msg} when is_pid(From) ->
            Node = seq_receiver_node(To, node(From)),
            case Node =/= node(From) andalso is_map_key(Node, Ns) of
                true -> {seq, element(2, Ev), Serial, From, Msg};
                false -> none
            end;
        _ ->
            none
    end;
send_key(_, _) ->
    none.

%% The node of a seq_trace send's receiver: a process, a name there, or a
%% name on the sender's node.
seq_receiver_node(To, _) when is_pid(To); is_port(To) -> node(To);
seq_receiver_node({Name, Node}, _) when is_atom(Name), is_atom(Node) -> Node;
seq_receiver_node(_, Here) -> Here.

waits_for_send(_, #nodes{sends = Sends}) when map_size(Sends) =:= 0 ->
    false;
waits_for_send(Ev, #nodes{sends = Sends}) ->
    is_map_key(receipt_key(Ev), Sends).

%% A receipt's message as send_key/2 shows its send, or none.
receipt_key(Ev) when element(1, Ev) =:= seq_trace, tuple_size(Ev) >= 3 ->
    case element(3, Ev) of
        {'receive', Serial, From, _To, Msg} -> {seq, element(2, Ev), Serial, From, Msg};
        _ -> none
    end;
receipt_key(Ev) when element(3, Ev) =:= 'receive', tuple_size(Ev) >= 4 ->
    {element(2, Ev), element(4, Ev)};
receipt_key(_) ->
    none.

%%% The end ---------------------------------------------------------------------

%% @doc Stops tracing on every node (their last events are still pulled
%% with request/1 until finished/1).
-spec close(nodes()) -> nodes().
close(#nodes{nodes = Ns} = E) ->
    E#nodes{nodes = maps:map(fun(_, #node{state = tracing, agent = A} = N) ->
                                     N#node{state = closing,
                                            close_ref = tracekit_proto:ask_close(A)};
                                (_, N) -> N
                             end, Ns)}.

%% @doc Whether every node has stopped and every event is taken; a node
%% that is late is not waited for.
-spec finished(nodes()) -> boolean().
finished(#nodes{nodes = Ns}) ->
    lists:all(fun(#node{late = true}) -> true;
                 (#node{state = S, queue = Q}) ->
                      (S =:= down orelse S =:= drained) andalso queue:is_empty(Q)
              end, maps:values(Ns)).

%% @doc Lets every agent go, and returns once they deleted what they kept
%% (or went, or a node did not answer in time).
-spec done(nodes()) -> ok.
done(#nodes{nodes = Ns}) ->
    Until = erlang:monotonic_time(millisecond) + ?CALL_MS,
    Asked = [{A, M, tracekit_proto:let_go(A)}
             || #node{agent = A, mon = M, state = S, late = false} <- maps:values(Ns),
                S =/= down],
    _ = [tracekit_proto:await(A, Ref, M, max(0, Until - erlang:monotonic_time(millisecond)))
         || {A, M, Ref} <- Asked],
    _ = [demonitor(M, [flush]) || #node{mon = M} <- maps:values(Ns)],
    ok.

%% @doc Per node: its state (`closed', `{down, Why}', `{late, Why}' when
%% it did not answer the end of the trace, `{failed, Why}' when it could
%% not take part), the last counters of its sink, and what it recorded
%% that was not handed out (`lost': dropped, overwritten, over a file's
%% limit or still buffered in its sink, or left in the merge; `late' of
%% them: handed over after the merge had gone past them).
-spec summary(nodes()) -> #{node() => node_summary()}.
summary(#nodes{nodes = Ns, failed = Failed}) ->
    Traced = maps:map(fun(_, #node{} = N) -> node_summary(N) end, Ns),
    maps:merge(maps:map(fun(_, Why) -> #{state => {failed, Why}, lost => 0, late => 0,
                                         counters => #{}}
                        end, Failed), Traced).

node_summary(#node{state = S, why = Why, counters = C, queue = Q, late_dropped = L}) ->
    State = case S of
                down -> {down, Why};
                drained -> closed;
                _ -> {late, "it did not answer the end of the trace"}
            end,
    Sink = maps:get(dropped, C, 0) + maps:get(overwritten, C, 0) + maps:get(buffered, C, 0)
        + maps:get(over, C, 0),
    #{state => State, counters => C, late => L, lost => Sink + L + queue:len(Q)}.

%% @doc Copies each other node's trace file into Dir (this node's is
%% there already), each made in a private directory and moved in whole.
%% Returns the files, and the nodes whose file could not be fetched with
%% the reason.
-spec fetch(nodes(), file:name_all()) -> {[file:filename_all()], [{node(), term()}]}.
fetch(#nodes{nodes = Ns}, Dir) ->
    lists:foldl(fun(#node{name = Name, state = drained} = N, {Ok, Bad}) ->
                        Path = in_dir(Dir, Name),
                        case fetch_one(N, Path, Dir) of
                            ok -> {[Path | Ok], Bad};
                            {error, Why} -> {Ok, [{Name, Why} | Bad]}
                        end;
                   (#node{name = Name, state = down, why = noconnection} = N, {Ok, Bad}) ->
                        %% Its agent keeps the file a while: the node may
                        %% still run (the connection was lost, maybe by
                        %% global's doing).
                        Path = in_dir(Dir, Name),
                        case fetch_again(N, Path, Dir, ?RECONNECT_TRIES) of
                            ok -> {[Path | Ok], Bad};
                            {error, Why} -> {Ok, [{Name, Why} | Bad]}
                        end;
                   (#node{name = Name, state = down, why = Why}, {Ok, Bad}) ->
                        {Ok, [{Name, {down, Why}} | Bad]};
                   (#node{name = Name}, {Ok, Bad}) ->
                        {Ok, [{Name, late} | Bad]}
                end, {[], []}, lists:keysort(#node.name, maps:values(Ns))).

%% A node whose connection was lost, connected again to fetch its file.
%% Connecting again can make global disconnect it once more (to prevent
%% overlapping partitions) while the cluster settles: a few tries.
fetch_again(#node{name = Name, agent = A} = N, Path, Dir, Tries) ->
    Result = case net_kernel:connect_node(Name) of
                 true -> fetch_one(N#node{mon = monitor(process, A)}, Path, Dir);
                 _ -> {error, {down, noconnection}}
             end,
    case Result of
        ok ->
            _ = tracekit_proto:let_go(A),
            ok;
        {error, _} when Tries > 1 ->
            timer:sleep(?RECONNECT_MS),
            fetch_again(N, Path, Dir, Tries - 1);
        {error, _} = E ->
            E
    end.

fetch_one(#node{name = Name}, _Path, _Dir) when Name =:= node() ->
    ok;
fetch_one(#node{agent = A, mon = Mon}, Path, Dir) ->
    case tracekit_private:dir(dir_name(Dir), ".tracekit-fetch-") of
        {ok, Private} ->
            Tmp = filename:join(Private, "node.tkt"),
            try
                maybe
                    %% (Nobody else can enter the directory: the mode is
                    %% set before anything is written.)
                    {ok, Fd} ?= file:open(Tmp, [write, raw, binary, exclusive]),
                    ok ?= file:change_mode(Tmp, 8#600),
                    ok ?= try pieces(A, Mon, Fd, 0)
                          after file:close(Fd)
                          end,
                    tracekit_private:move_in(Tmp, Path)
                end
            of
                ok -> ok;
                {error, Why} -> {error, Why}
            after
                tracekit_private:delete_dir(Private)
            end;
        {error, Posix} ->
            {error, {file, Dir, Posix}}
    end.

dir_name(Dir) when is_binary(Dir) -> Dir;
dir_name(Dir) -> unicode:characters_to_list(filename:flatten(Dir)).

pieces(A, Mon, Fd, Off) ->
    Ref = tracekit_proto:ask_read(A, Off, ?PIECE),
    case tracekit_proto:await(A, Ref, Mon, ?CALL_MS) of
        {ok, {data, Bin}} ->
            case file:write(Fd, Bin) of
                ok -> pieces(A, Mon, Fd, Off + byte_size(Bin));
                {error, _} = E -> E
            end;
        {ok, eof} -> ok;
        {ok, {error, Why}} -> {error, Why};
        {ok, Other} -> {error, {unexpected, Other}};
        {down, Why} -> {error, {down, Why}};
        timeout -> {error, timeout}
    end.
