%% @private
%% @doc The calling node's side of a trace of several nodes: checks the
%% nodes, starts a {@link tracekit_agent} on each, pulls their events and
%% merges them by time; then closes them and fetches their trace files.
%%
%% Time. Each node's events carry its own clock. At start the offset of
%% each node's clock is measured (the best of five round trips: the error
%% is at most half of that round trip), and an event's time is its
%% timestamp less the offset of its node. An agent answers with its
%% horizon: every event it drains later comes after it. An event goes out
%% of the merge only when every other node has an event after it in hand,
%% or a horizon past it, or is finished: so the merged stream is in time
%% order across nodes (as exact as the offsets), and exactly in each
%% node's own order for its events.
%%
%% The state is driven by the runner: {@link request/1} asks every agent
%% that has no question open for a batch, {@link handle/2} takes in what
%% comes back (the runner's process receives it), {@link take/1} hands out
%% what the merge can let go.
-module(tracekit_cluster).

-export([start/3, request/1, handle/2, take/1, close/1, finished/1, done/1,
         nodes_summary/1, file_stats/1, fetch/2, offsets/1, names/1]).

-export_type([cluster/0]).

-define(BATCH, 1000).
-define(IDLE_MS, 10).
-define(CALL_MS, 10000).
%% Bytes of a trace file fetched per request.
-define(PIECE, 1 bsl 20).

-record(node, {name :: node(),
               agent :: pid(),
               mon :: reference(),
               offset = 0 :: integer(),           % its clock less ours, us
               error = 0 :: non_neg_integer(),    % how wrong offset may be, us
               queue = queue:new() :: queue:queue({integer(), tuple()}),
               horizon = undefined :: undefined | integer() | closed,
               pending = undefined :: undefined | reference(),
               ready_at = now :: now | integer(), % ask again from then (ms)
               state = tracing :: tracing | closing | closed | down,
               stats = #{} :: map(),
               why = undefined :: term()}).

-record(cluster, {nodes = #{} :: #{node() => #node{}},
                  sink :: ring | file,
                  %% Messages sent to a process of another node traced,
                  %% in hand and not handed out yet: {To, hash of the
                  %% message} => how many.
                  sends = #{} :: #{{pid(), integer()} => pos_integer()},
                  %% How far past an event every node's horizon must be
                  %% before it goes out: twice the clocks' error, so that
                  %% the send of a message received is in hand.
                  margin = 0 :: non_neg_integer(),
                  %% Registered names of the nodes' processes, as their
                  %% agents found them.
                  names = #{} :: #{pid() => atom()}}).

-opaque cluster() :: #cluster{}.

%%% Start ---------------------------------------------------------------------

%% @doc Checks every node, then starts the trace on each: nothing is traced
%% anywhere unless every node can take its part. `Req''s processes may be
%% pids of any of the nodes and names (looked up on every node).
-spec start([node()], tracekit_runner:request(), map()) ->
          {ok, cluster()} | {error, term()}.
start(Nodes0, Req, Opts) ->
    Nodes = lists:usort(Nodes0),
    Sink = case Opts of #{file := _} -> file; _ -> ring end,
    maybe
        ok ?= check_all(Nodes, Sink),
        {ok, Procs} ?= procs_per_node(maps:get(procs, Req), Nodes),
        start_agents(Nodes, Procs, Req, Opts, #cluster{sink = Sink})
    end.

check_all([], _Sink) ->
    ok;
check_all([N | Ns], Sink) ->
    case check(N, Sink) of
        ok -> check_all(Ns, Sink);
        {error, Why} -> {error, {bad_node, N, Why}}
    end.

check(N, Sink) when N =:= node() ->
    tracekit_agent:check(Sink);
check(N, Sink) ->
    %% A hidden node (a remote shell's, say) is connected too.
    case lists:member(N, nodes(connected)) of
        false ->
            {error, "not connected to this node (connect it first, for example "
                    "with net_adm:ping/1)"};
        true ->
            try erpc:call(N, tracekit_agent, check, [Sink], ?CALL_MS)
            catch
                error:{exception, undef, _} ->
                    {error, "tracekit is not loaded there (its ebin is not in "
                            "that node's code path)"};
                error:{erpc, Why} ->
                    {error, text("no answer (~0tp)", [Why])};
                Class:Why ->
                    {error, text("the check failed: ~w:~0tP", [Class, Why, 10])}
            end
    end.

text(Fmt, Args) -> lists:flatten(io_lib:format(Fmt, Args)).

%% all, new, existing: the same on every node; pids on their own node;
%% names on every node where they are registered.
procs_per_node(P, Nodes) when is_atom(P), P =:= all orelse P =:= new orelse P =:= existing ->
    {ok, maps:from_list([{N, P} || N <- Nodes])};
procs_per_node(L, Nodes) ->
    try
        Pids = lists:append([pids_of(X, Nodes) || X <- L]),
        {ok, maps:from_list([{N, lists:usort([P || P <- Pids, node(P) =:= N])}
                             || N <- Nodes])}
    catch
        throw:{bad_process, _, _} = E -> {error, E}
    end.

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

start_agents([], _Procs, _Req, _Opts, #cluster{nodes = Ns} = C) ->
    Err = lists:max([0 | [E || #node{error = E} <- maps:values(Ns)]]),
    {ok, C#cluster{margin = 2 * Err + 100}};
start_agents([N | Ns], Procs, Req, Opts, #cluster{nodes = Started} = C) ->
    {Offset, Err} = offset(N),
    NodeReq = Req#{procs := maps:get(N, Procs)},
    NodeOpts = node_opts(N, Opts),
    case start_agent(N, NodeReq, NodeOpts) of
        {ok, Agent} ->
            Node = #node{name = N, agent = Agent, mon = monitor(process, Agent),
                         offset = Offset, error = Err},
            start_agents(Ns, Procs, Req, Opts, C#cluster{nodes = Started#{N => Node}});
        {error, Why} ->
            done(close(C)),
            {error, start_error(N, Why)}
    end.

%% Why a node could not start tracing, as a sentence (this node's file
%% error as it is: the runner tells it as the file option's).
start_error(N, {file, _, _} = Why) when N =:= node() ->
    {bad_node, N, Why};
start_error(_N, {bad_process, _, _} = Why) ->
    Why;
start_error(N, {file, Path, Posix}) ->
    {bad_node, N, text("cannot create the trace file ~ts there: ~ts (~w)",
                       [Path, file:format_error(Posix), Posix])};
start_error(N, {badopt, O}) ->
    {bad_node, N, text("the ring cannot be made there with ~0tP (see tracekit_ring:limits/0)",
                       [O, 10])};
start_error(N, {agent_failed, Why}) ->
    {bad_node, N, text("tracing could not start there: ~0tP", [Why, 10])};
start_error(N, {error, {erpc, Why}}) ->
    {bad_node, N, text("no answer (~0tp)", [Why])};
start_error(N, Why) ->
    {bad_node, N, text("tracing could not start there: ~0tP", [Why, 10])}.

start_agent(N, Req, Opts) when N =:= node() ->
    tracekit_agent:start(self(), Req, Opts);
start_agent(N, Req, Opts) ->
    try erpc:call(N, tracekit_agent, start, [self(), Req, Opts], ?CALL_MS)
    catch Class:Why -> {error, {Class, Why}}
    end.

%% What an agent needs of the options (no funs, no io device). With `file'
%% (a directory here), this node writes its file there; the others in
%% their temporary directory, fetched at the end.
node_opts(N, Opts) ->
    O = maps:with([scope, io, ring_size, payload, max_events, rate], Opts),
    O1 = O#{io => io_here(maps:get(io, Opts, standard_io))},
    case Opts of
        #{file := Dir} when N =:= node() ->
            O1#{file => true, node_file => {in_dir(Dir, N), kept}};
        #{file := _} ->
            O1#{file => true, node_file => {temp, "tracekit-" ++ unique() ++ "-" ++ file_name(N)}};
        _ ->
            O1
    end.

io_here(Io) ->
    case tracekit_setup:io_pid(Io) of
        P when is_pid(P) -> P;
        undefined -> standard_io
    end.

file_name(N) -> atom_to_list(N) ++ ".tkt".

%% Node N's file in Dir. Dir may be a binary, or a deep list of
%% characters, atoms and binaries (as tracekit takes it), which
%% filename:join/2 does not take.
in_dir(Dir, N) when is_binary(Dir) ->
    filename:join(Dir, file_name(N));
in_dir(Dir, N) ->
    filename:join(unicode:characters_to_list(filename:flatten(Dir)), file_name(N)).

unique() -> integer_to_list(erlang:unique_integer([positive])).

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

%% @doc The registered names of the processes of the nodes that their
%% events mention.
-spec names(cluster()) -> #{pid() => atom()}.
names(#cluster{names = Names}) ->
    Names.

%% @doc Each node's clock offset and its error bound, in microseconds.
-spec offsets(cluster()) -> #{node() => {integer(), non_neg_integer()}}.
offsets(#cluster{nodes = Ns}) ->
    maps:map(fun(_, #node{offset = O, error = E}) -> {O, E} end, Ns).

%%% Running -------------------------------------------------------------------

%% @doc Asks every agent that has no request open for its next batch.
%% A node whose last batch was not full is asked again IDLE_MS later.
-spec request(cluster()) -> cluster().
request(#cluster{nodes = Ns} = C) ->
    Now = erlang:monotonic_time(millisecond),
    C#cluster{nodes = maps:map(fun(_, N) -> ask(N, Now) end, Ns)}.

ask(#node{state = S, pending = undefined, agent = A, ready_at = R} = N, Now)
  when (S =:= tracing orelse S =:= closing), R =:= now orelse Now >= R ->
    Ref = make_ref(),
    A ! {more, Ref, ?BATCH},
    N#node{pending = Ref};
ask(N, _Now) ->
    N.

%% @doc Takes in a message for the cluster: an agent's answer, or the end
%% of an agent (`{down, Node, Why, C}': its node went down or
%% disconnected, or the agent failed). `ignore' for other messages.
-spec handle(term(), cluster()) ->
          {ok, cluster()} | {down, node(), term(), cluster()} | ignore.
handle({tracekit_agent, A, Ref, Answer}, C) ->
    case by_agent(A, C) of
        #node{pending = Ref} = N ->
            N1 = answer(Answer, N#node{pending = undefined}),
            C1 = C#cluster{nodes = (C#cluster.nodes)#{N#node.name := N1},
                           names = maps:merge(C#cluster.names, answer_names(Answer))},
            {ok, note_sends(Answer, C1)};
        #node{} -> {ok, C};                     % the acknowledgement of close
        false -> ignore
    end;
handle({'DOWN', Mon, process, A, Why}, C) ->
    case by_agent(A, C) of
        #node{mon = Mon, state = closed} = N ->
            {ok, put_node(N, C)};
        #node{mon = Mon, name = Name} = N ->
            {down, Name, Why, put_node(N#node{state = down, horizon = closed,
                                               pending = undefined, why = Why}, C)};
        _ ->
            ignore
    end;
handle(_, _) ->
    ignore.

by_agent(A, #cluster{nodes = Ns}) ->
    case [N || #node{agent = Ag} = N <- maps:values(Ns), Ag =:= A] of
        [N] -> N;
        [] -> false
    end.

put_node(#node{name = Name} = N, #cluster{nodes = Ns} = C) ->
    C#cluster{nodes = Ns#{Name := N}}.

answer_names({events, _, _, _, Names}) -> Names;
answer_names(_) -> #{}.

answer({events, Es, H, Stats, _Names}, #node{queue = Q, offset = Off, state = S} = N) ->
    Timed = [{tracekit_runner:event_time(E) - Off, E} || E <- Es],
    Q1 = queue:join(Q, queue:from_list(Timed)),
    Horizon = case H of
                  closed -> closed;
                  last when Timed =:= [] -> N#node.horizon;
                  last -> element(1, lists:last(Timed));
                  T -> T - Off
              end,
    N#node{queue = Q1, horizon = Horizon, stats = Stats,
           state = case H of closed -> closed; _ -> S end,
           ready_at = ready_at(length(Es))};
answer({file, Stats}, #node{state = S} = N) ->
    N#node{stats = Stats, state = case S of closing -> closed; _ -> S end,
           ready_at = ready_at(0)};
answer(_, N) ->
    N.

ready_at(?BATCH) -> now;
ready_at(_) -> erlang:monotonic_time(millisecond) + ?IDLE_MS.

%% @doc The events the merge can let go now, in time order, each as
%% `{Node, Time, Event}' (Time: microseconds on the calling node's clock).
%%
%% Causal order of messages between nodes: the clocks are known only
%% within their error, which can be more than a message takes from one
%% node to another. So the receipt of a message whose send, from another
%% node, is in hand and not handed out waits for that send (the send is
%% matched by receiver and message); and an event goes out only when every
%% node's horizon is a margin past it, so that such a send is in hand.
-spec take(cluster()) -> {[{node(), integer(), tuple()}], cluster()}.
take(C) ->
    take(C, []).

take(#cluster{nodes = Ns} = C, Acc) ->
    Heads = lists:sort([{T, Name, E} || #node{name = Name, queue = Q} <- maps:values(Ns),
                                        {value, {T, E}} <- [queue:peek(Q)]]),
    Ready = [H || {_, _, E} = H <- Heads, not waits_for_send(E, C)],
    Next = case {Ready, Heads} of
               {[H | _], _} -> H;
               {[], [H | _]} -> H;   % (a cycle cannot be causal: by time)
               {[], []} -> none
           end,
    case Next of
        none ->
            {lists:reverse(Acc), C};
        {T, Name, E} ->
            case lists:all(fun(N) -> after_or_done(N, T, Name, C#cluster.margin) end,
                           maps:values(Ns)) of
                true ->
                    #node{queue = Q} = N = maps:get(Name, Ns),
                    C1 = put_node(N#node{queue = queue:drop(Q)}, C),
                    take(handed_out(E, Name, C1), [{Name, T, E} | Acc]);
                false ->
                    {lists:reverse(Acc), C}
            end
    end.

%% Whether node N can have nothing before T that is not in hand.
after_or_done(#node{name = Name}, _T, Name, _Margin) -> true;
after_or_done(#node{queue = Q, horizon = H}, T, _, Margin) ->
    not queue:is_empty(Q) orelse H =:= closed orelse (is_integer(H) andalso H >= T + Margin).

%% Sends to a process of another node, as the agent's batch brings them.
note_sends({events, Es, _, _, _}, #cluster{sends = Sends} = C) ->
    C#cluster{sends = lists:foldl(fun(E, Acc) ->
                                          case send_key(E, C) of
                                              none -> Acc;
                                              K -> maps:update_with(K, fun(V) -> V + 1 end, 1, Acc)
                                          end
                                  end, Sends, Es)};
note_sends(_, C) ->
    C.

handed_out(E, _Node, #cluster{sends = Sends} = C) ->
    case send_key(E, C) of
        none -> C;
        K ->
            case maps:get(K, Sends, 0) of
                V when V > 1 -> C#cluster{sends = Sends#{K := V - 1}};
                _ -> C#cluster{sends = maps:remove(K, Sends)}
            end
    end.

send_key(E, #cluster{nodes = Ns}) when element(1, E) =:= trace_ts orelse element(1, E) =:= trace,
                                      element(3, E) =:= send, tuple_size(E) >= 5 ->
    From = element(2, E),
    To = element(5, E),
    case is_pid(To) andalso is_pid(From) andalso node(To) =/= node(From)
        andalso is_map_key(node(To), Ns) of
        true -> {To, erlang:phash2(element(4, E))};
        false -> none
    end;
send_key(_, _) ->
    none.

waits_for_send(E, #cluster{sends = Sends}) when element(3, E) =:= 'receive',
                                                tuple_size(E) >= 4, map_size(Sends) > 0 ->
    is_map_key({element(2, E), erlang:phash2(element(4, E))}, Sends);
waits_for_send(_, _) ->
    false.

%% @doc Stops tracing on every node (their last events are still pulled
%% with request/1 until finished/1).
-spec close(cluster()) -> cluster().
close(#cluster{nodes = Ns} = C) ->
    C#cluster{nodes = maps:map(fun(_, #node{state = tracing, agent = A} = N) ->
                                       A ! {close, make_ref()},
                                       N#node{state = closing};
                                  (_, N) -> N
                               end, Ns)}.

%% @doc Whether every node has stopped, and every event is taken.
-spec finished(cluster()) -> boolean().
finished(#cluster{nodes = Ns}) ->
    lists:all(fun(#node{state = S, queue = Q}) ->
                      (S =:= closed orelse S =:= down) andalso queue:is_empty(Q)
              end, maps:values(Ns)).

%% @doc Lets every agent go (they delete what they kept).
-spec done(cluster()) -> ok.
done(#cluster{nodes = Ns}) ->
    _ = [A ! {done, make_ref()} || #node{agent = A, state = S} <- maps:values(Ns),
                                   S =/= down],
    _ = [demonitor(M, [flush]) || #node{mon = M} <- maps:values(Ns)],
    ok.

%% @doc Per node: its state (`closed', or `{down, Why}') and what its ring
%% or file did not keep (`dropped') as last reported.
-spec nodes_summary(cluster()) -> #{node() => #{state := term(), dropped := non_neg_integer()}}.
nodes_summary(#cluster{nodes = Ns, sink = Sink}) ->
    maps:map(fun(_, #node{state = S, why = Why, stats = St}) ->
                     #{state => case S of down -> {down, Why}; _ -> S end,
                       dropped => lost(Sink, St)}
             end, Ns).

lost(ring, St) -> maps:get(dropped, St, 0) + maps:get(buffered, St, 0);
lost(file, St) -> maps:get(dropped, St, 0) + maps:get(over, St, 0) + maps:get(buffered, St, 0).

%% @doc The last counters of each node's trace file.
-spec file_stats(cluster()) -> #{node() => map()}.
file_stats(#cluster{nodes = Ns}) ->
    maps:map(fun(_, #node{stats = St}) -> St end, Ns).

%% @doc Copies each other node's trace file into Dir (this node's is
%% there already). Returns the files, and the nodes whose file could not
%% be fetched with the reason.
-spec fetch(cluster(), file:name_all()) -> {[file:filename_all()], [{node(), term()}]}.
fetch(#cluster{nodes = Ns}, Dir) ->
    lists:foldl(fun(#node{name = Name, state = closed} = N, {Ok, Bad}) ->
                        Path = in_dir(Dir, Name),
                        case fetch_one(N, Path) of
                            ok -> {[Path | Ok], Bad};
                            {error, Why} -> {Ok, [{Name, Why} | Bad]}
                        end;
                   (#node{name = Name, why = Why}, {Ok, Bad}) ->
                        {Ok, [{Name, {down, Why}} | Bad]}
                end, {[], []}, lists:keysort(#node.name, maps:values(Ns))).

fetch_one(#node{name = Name}, _Path) when Name =:= node() ->
    ok;
fetch_one(#node{agent = A, mon = Mon}, Path) ->
    case file:open(Path, [write, raw, binary]) of
        {ok, Fd} ->
            try pieces(A, Mon, Fd, 0)
            after file:close(Fd)
            end;
        {error, Why} ->
            {error, {file, Path, Why}}
    end.

pieces(A, Mon, Fd, Off) ->
    Ref = make_ref(),
    A ! {read, Ref, Off, ?PIECE},
    receive
        {tracekit_agent, A, Ref, {data, Bin}} ->
            case file:write(Fd, Bin) of
                ok -> pieces(A, Mon, Fd, Off + byte_size(Bin));
                {error, _} = E -> E
            end;
        {tracekit_agent, A, Ref, eof} -> ok;
        {tracekit_agent, A, Ref, {error, Why}} -> {error, Why};
        {'DOWN', Mon, process, A, Why} -> {error, {down, Why}}
    after ?CALL_MS ->
            {error, timeout}
    end.
