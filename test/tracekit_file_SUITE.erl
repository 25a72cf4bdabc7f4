%% tracekit_file on a real VM: wrap sets, files cut short by a killed node,
%% damaged files, a disk that fills, bad paths and options. (Every workload
%% of the differential suite also runs through a file: tracekit_ring_SUITE.)
-module(tracekit_file_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_testcase/2, end_per_testcase/2]).
-export([wrap_set/1, killed_node/1, damaged_files/1, disk_fills/1,
         bad_paths_and_options/1, accounting_under_load/1, flush_and_stats/1,
         several_files_merge/1, limits/1, wrap_set_reopened/1,
         dictionary_chunks/1, files_are_private/1, private_dirs/1,
         close_while_recording/1, room_again/1, cut_files_say_so/1,
         version_1_files/1]).
-export([write_until_killed/2, fill_disk/1, close_cycles/2, fill_then_room/1]).

all() ->
    [flush_and_stats, wrap_set, wrap_set_reopened, several_files_merge,
     dictionary_chunks, accounting_under_load, killed_node, damaged_files,
     disk_fills, bad_paths_and_options, limits, files_are_private, private_dirs,
     close_while_recording, room_again, cut_files_say_so, version_1_files].

init_per_testcase(_, Config) ->
    Config.

end_per_testcase(_, _) ->
    ok.

path(Config, Name) ->
    filename:join(?config(priv_dir, Config), Name).

%% A process that sends N numbered messages to itself, traced into Sink,
%% then one more (done) to the caller: N + 1 sends.
traced_sends(Sink, N) ->
    S = trace:session_create(file_suite, Sink, []),
    Self = self(),
    P = spawn(fun() -> receive go -> ok end,
                       [self() ! {n, I, <<I:32>>} || I <- lists:seq(1, N)],
                       Self ! {done, self()} end),
    1 = trace:process(S, P, true, [send]),
    P ! go,
    receive {done, P} -> ok end,
    S.

numbers(Events) ->
    [I || {trace, _, send, {n, I, _}, _} <- Events].


%% flush/1 returns once what was recorded is in the file: it can be read
%% while the file stays open; stats count exactly.
flush_and_stats(Config) ->
    Path = path(Config, "flush.tkt"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    S = traced_sends({tracekit_file, F}, 500),
    ok = tracekit_file:flush(F),
    #{written := 501, dropped := 0, buffered := 0, files := 1, write_errors := 0,
      bytes := Bytes} = tracekit_file:stats(F),
    ?assertEqual(Bytes, filelib:file_size(Path)),
    %% Open and unfinished (no end chunk yet): every event so far reads,
    %% and the reader says the file ends there, not complete.
    {error, {corrupt, Path, Bytes}, Evs} = tracekit_file:read(Path),
    ?assertEqual(lists:seq(1, 500), numbers(Evs)),
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    ok = tracekit_file:close(F), % again: nothing more to do
    #{closed := true} = tracekit_file:stats(F),
    {ok, 501} = tracekit_file:format(Path, #{io => ct_io()}).

ct_io() ->
    {ok, D} = file:open("/dev/null", [write]),
    D.

%% A wrap set: files Path.0 .. Path.(Count-1) reused in turn; the newest
%% Count are kept, the oldest reused, and the events read back in time
%% order across the set are the newest ones, contiguous.
wrap_set(Config) ->
    Base = path(Config, "wrap"),
    {ok, F} = tracekit_file:new(#{path => Base, wrap => {16384, 4}}),
    S = traced_sends({tracekit_file, F}, 5000),
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    %% `written' events are in the files, the rest were overwritten (they
    %% were all counted as written, 3.86 M of them for 77 k in the files).
    #{written := W, overwritten := O, dropped := 0, files := Files} = tracekit_file:stats(F),
    ?assertEqual(5001, W + O),
    ?assert(O > 0),
    ?assert(Files > 4),
    Names = lists:sort(filelib:wildcard(Base ++ ".*")),
    ?assertEqual([Base ++ "." ++ integer_to_list(I) || I <- lists:seq(0, 3)], Names),
    [?assert(filelib:file_size(N) =< 16384 + 4096) || N <- Names],
    {ok, Evs} = tracekit_file:read(Base),
    ?assertEqual(W, length(Evs)),
    Ns = numbers(Evs),
    ct:log("~p events in the set", [length(Ns)]),
    ?assert(length(Ns) > 500),
    ?assert(length(Ns) < 5000),
    ?assertEqual(lists:seq(5000 - length(Ns) + 1, 5000), Ns),
    %% The file written last holds the newest events.
    Last = lists:nth((Files - 1) rem 4 + 1, Names),
    {ok, LastEvs} = tracekit_file:read(Last),
    ?assertEqual(5000, lists:last(numbers(LastEvs))).

%% A wrap set opened again at the same base, with fewer files or for a
%% shorter run: the files of the earlier set that the new one does not
%% reuse were read with it, their events merged into the new trace. The
%% new set now starts alone; a file of a set's name that is not a trace
%% file is left where it is.
wrap_set_reopened(Config) ->
    Base = path(Config, "rewrap"),
    Names = fun() -> lists:sort(filelib:wildcard(Base ++ ".*")) end,
    Name = fun(I) -> Base ++ "." ++ integer_to_list(I) end,
    Run = fun(Wrap, N) ->
                  {ok, F} = tracekit_file:new(#{path => Base, wrap => Wrap}),
                  S = traced_sends({tracekit_file, F}, N),
                  trace:session_destroy(S),
                  ok = tracekit_file:close(F),
                  #{written := W, overwritten := O, dropped := 0} = tracekit_file:stats(F),
                  ?assertEqual(N + 1, W + O),
                  {_, Count} = Wrap,
                  Set = [Name(I) || I <- lists:seq(0, Count - 1), filelib:is_regular(Name(I))],
                  {ok, Evs} = tracekit_file:read(Set),
                  ?assertEqual(W, length(Evs))
          end,
    Run({16384, 4}, 5000),
    ?assertEqual([Name(I) || I <- lists:seq(0, 3)], Names()),
    %% Two files now, the run long enough to use both.
    Run({16384, 2}, 1000),
    ?assertEqual([Name(0), Name(1)], Names()),
    {ok, Evs} = tracekit_file:read(Base),
    Ns = numbers(Evs),
    ?assert(Ns =/= []),
    ?assertEqual(lists:seq(1000 - length(Ns) + 1, 1000), Ns),
    %% The same count again, a run that fills one file only.
    Run({16384, 4}, 5000),
    ok = file:write_file(Name(7), <<"not a trace">>),
    Run({16384, 4}, 10),
    ?assertEqual([Name(0), Name(7)], Names()),
    ok = file:delete(Name(7)),
    {ok, Evs2} = tracekit_file:read(Base),
    ?assertEqual(lists:seq(1, 10), numbers(Evs2)).

%% A file of many dictionary chunks (a trace of short-lived processes has
%% one before most events chunks) is read in time linear in its entries:
%% each chunk's entries were appended to a tuple of all before, so that
%% reading cost the square of the entries. Files of N and 4N entries, in
%% chunks of 50, take about 4 times the time and the reductions (the
%% quadratic reader took 17 and 8 times). Each is read three times and
%% the best ratio of reductions is held to a generous bound; the times are
%% logged only (a shared machine makes them noisy).
dictionary_chunks(Config) ->
    Small = path(Config, "dict1.tkt"),
    Big = path(Config, "dict4.tkt"),
    dict_file(Small, 500, 50),
    dict_file(Big, 2000, 50),
    %% Every event names its entry, whatever chunk it came in.
    {ok, Evs} = tracekit_file:read(Small),
    ?assertEqual([{trace, dict_pid(C * 50 + 49), send, C} || C <- lists:seq(0, 499)], Evs),
    Reads = [{dict_read(Small), dict_read(Big)} || _ <- [1, 2, 3]],
    ct:log("{{Events, Reductions, Microseconds}, ...}: ~p", [Reads]),
    [?assertMatch({{500, _, _}, {2000, _, _}}, R) || R <- Reads],
    Reds = lists:min([R4 / R1 || {{_, R1, _}, {_, R4, _}} <- Reads]),
    Time = lists:min([T4 || {_, {_, _, T4}} <- Reads]) /
        lists:min([T1 || {{_, _, T1}, _} <- Reads]),
    ct:log("4 times the entries: ~.1f times the reductions, ~.1f times the time",
           [Reds, Time]),
    ?assert(Reds < 6),
    %% What a reader's dictionary takes: the next numbers, whole entries.
    {ok, H} = tracekit_file:reader_open(list_to_binary(Small)),
    Entry = term_to_binary(x),
    Dict = fun(First, Es) -> <<First:32/little, (length(Es)):32/little,
                               (<< <<(byte_size(E)):32/little, E/binary>> || E <- Es >>)/binary>>
           end,
    ?assertEqual(ok, tracekit_file:reader_dict(H, Dict(0, [Entry]))),
    ?assertEqual({error, bad_chunk}, tracekit_file:reader_dict(H, Dict(0, [Entry]))),
    ?assertEqual({error, bad_chunk}, tracekit_file:reader_dict(H, Dict(2, [Entry]))),
    Zip = term_to_binary(lists:duplicate(1000, x), [compressed]),
    <<131, 80, _/binary>> = Zip,
    ?assertEqual({error, bad_chunk}, % compressed, trailing bytes, not a term
                 tracekit_file:reader_dict(H, Dict(1, [Entry, Zip]))),
    ?assertEqual({error, bad_chunk},
                 tracekit_file:reader_dict(H, Dict(1, [<<Entry/binary, 0>>]))),
    ?assertEqual({error, bad_chunk}, tracekit_file:reader_dict(H, Dict(1, [<<131, 255>>]))),
    ?assertEqual({error, bad_chunk}, tracekit_file:reader_dict(H, <<1:32/little, 5:32/little>>)),
    %% A bad chunk left nothing: entry 1 is still the next.
    ?assertEqual(ok, tracekit_file:reader_dict(H, Dict(1, [Entry, Entry]))),
    Rec = <<0, 0, 14, 2, 3, 14>>, % DICT 2, INT 7 (zigzag: 14)
    Events = <<0:64, 0:64, 1:32/little, (byte_size(Rec)):32/little, 0:64, Rec/binary>>,
    {[{_, 0, {trace, x, _, 7}}], 0} = tracekit_file:reader_events(H, Events, {0, 0, 1000}),
    ?assertError(badarg, tracekit_file:reader_dict(Events, H)),
    ?assertError(badarg, tracekit_file:reader_events(Events, H, {0, 0, 1000})),
    ok = tracekit_file:reader_close(H),
    ?assertEqual({error, closed}, tracekit_file:reader_dict(H, Dict(3, [Entry]))),
    {[], 1} = tracekit_file:reader_events(H, Events, {0, 0, 1000}).

dict_pid(I) ->
    list_to_pid("<0." ++ integer_to_list(I) ++ ".0>").

%% A crafted file (FORMAT.md): Chunks dictionary chunks of PerChunk local
%% pids, each followed by an events chunk of one record, whose tracee is
%% its chunk's last entry.
dict_file(Path, Chunks, PerChunk) ->
    Header = #{format => 2, node => node(), anchor => {0, 0}, stamp => monotonic,
               stamp_hz => 1000000000, sequence => 0, wrap => none,
               tags => [send], machine => <<"dictionary_chunks">>},
    Crc = crc_table(),
    Body = [begin
                First = C * PerChunk,
                Entries = << <<(byte_size(E)):32/little, E/binary>>
                             || I <- lists:seq(First, First + PerChunk - 1),
                                E <- [term_to_binary(dict_pid(I))] >>,
                %% {trace, Entry, send, C}: the tag's index, DICT, INT.
                Rec = <<0, 0, 14, (uv(First + PerChunk - 1))/binary, 3, (uv(2 * C))/binary>>,
                [chunk(2, <<First:32/little, PerChunk:32/little, Entries/binary>>, Crc),
                 chunk(3, <<0:64, 0:64, 1:32/little, (byte_size(Rec)):32/little, C:64/little,
                            Rec/binary>>, Crc)]
            end || C <- lists:seq(0, Chunks - 1)],
    ok = file:write_file(Path, [<<"TKTRACE2">>, chunk(1, term_to_binary(Header), Crc), Body,
                                chunk(5, term_to_binary(#{}), Crc)]).

%% An unsigned varint (FORMAT.md).
uv(N) when N < 128 -> <<N>>;
uv(N) -> <<(N band 127 bor 128), (uv(N bsr 7))/binary>>.

%% {Events, Reductions, Microseconds} of a fold over a file, in a process
%% of its own (its reductions are the read's).
dict_read(Path) ->
    {Pid, Ref} =
        spawn_monitor(
          fun() ->
                  {reductions, R0} = process_info(self(), reductions),
                  T0 = erlang:monotonic_time(microsecond),
                  {ok, N} = tracekit_file:fold(fun(_, A) -> A + 1 end, 0, Path),
                  T1 = erlang:monotonic_time(microsecond),
                  {reductions, R1} = process_info(self(), reductions),
                  exit({read, N, R1 - R0, T1 - T0})
          end),
    receive {'DOWN', Ref, process, Pid, {read, N, R, T}} -> {N, R, T} end.

chunk(Type, P, Crc) ->
    H = <<Type, 0, 0:16, (byte_size(P)):32/little>>,
    <<16#4B434B54:32/little, H/binary, (crc32c(<<H/binary, P/binary>>, Crc)):32/little,
      P/binary>>.

%% CRC-32C (Castagnoli), reflected (FORMAT.md).
crc_table() ->
    list_to_tuple([lists:foldl(fun(_, X) when X band 1 =:= 1 -> (X bsr 1) bxor 16#82F63B78;
                                  (_, X) -> X bsr 1
                               end, N, lists:seq(1, 8)) || N <- lists:seq(0, 255)]).

crc32c(Bin, T) ->
    bnot crc32c(Bin, T, 16#FFFFFFFF) band 16#FFFFFFFF.

crc32c(<<B, R/binary>>, T, C) ->
    crc32c(R, T, (C bsr 8) bxor element(((C bxor B) band 255) + 1, T));
crc32c(<<>>, _, C) ->
    C.

%% Several files (of several nodes) are read merged in time order.
several_files_merge(Config) ->
    Paths = [path(Config, "merge" ++ integer_to_list(I)) || I <- [1, 2, 3]],
    Files = [begin {ok, F} = tracekit_file:new(#{path => P}), F end || P <- Paths],
    Sessions = [trace:session_create(list_to_atom("merge" ++ integer_to_list(I)),
                                     {tracekit_file, F}, [])
                || {I, F} <- lists:zip([1, 2, 3], Files)],
    P = spawn(fun Loop() -> receive {n, _} -> Loop() end end),
    %% Each message goes through one of the files, in turn.
    [begin
         S = lists:nth(I rem 3 + 1, Sessions),
         1 = trace:process(S, self(), true, [send]),
         P ! {n, I},
         1 = trace:process(S, self(), false, [send])
     end || I <- lists:seq(1, 300)],
    [trace:session_destroy(S) || S <- Sessions],
    [ok = tracekit_file:close(F) || F <- Files],
    {ok, Evs} = tracekit_file:read(Paths),
    ?assertEqual(lists:seq(1, 300), [I || {trace, _, send, {n, I}, _} <- Evs]).

%% Under load that the disk cannot follow (a small buffer), what is not
%% written is counted: written + dropped is every event offered, and the
%% file holds exactly `written'.
accounting_under_load(Config) ->
    accounting_under_load(path(Config, "load.tkt"), #{}),
    %% A wrap set: what wrapping overwrote is counted apart.
    accounting_under_load(path(Config, "load_set"), #{wrap => {4096, 3}}).

accounting_under_load(Path, Opts) ->
    {ok, C} = tracekit_count:new(),
    {ok, F} = tracekit_file:new(Opts#{path => Path, buffer => 4096}),
    S1 = trace:session_create(load_count, {tracekit_count, C}, []),
    S2 = trace:session_create(load_file, {tracekit_file, F}, []),
    Self = self(),
    Ps = [spawn(fun() -> receive go -> ok end,
                         [self() ! {n, I, lists:seq(1, 20)} || I <- lists:seq(1, 20000)],
                         Self ! {done, self()} end) || _ <- [1, 2, 3, 4]],
    [1 = trace:process(S, P, true, [send]) || P <- Ps, S <- [S1, S2]],
    [P ! go || P <- Ps],
    [receive {done, P} -> ok end || P <- Ps],
    [trace:session_destroy(S) || S <- [S1, S2]],
    ok = tracekit_file:close(F),
    #{send := Offered} = tracekit_count:read(C),
    #{written := W, dropped := D, buffered := 0, overwritten := O} = tracekit_file:stats(F),
    ct:log("~p: offered ~p written ~p overwritten ~p dropped ~p", [Opts, Offered, W, O, D]),
    ?assertEqual(80004, Offered), % and the four done messages
    ?assertEqual(Offered, W + O + D),
    ?assertEqual(maps:is_key(wrap, Opts), O > 0),
    {ok, Evs} = tracekit_file:read(Path),
    ?assertEqual(W, length(Evs)).

%% A node killed (kill -9) while it writes: every event of the complete
%% chunks reads back, in order, and nothing after the cut is made up.
killed_node(Config) ->
    Path = path(Config, "killed.tkt"),
    Paths = [filename:dirname(code:which(M)) || M <- [tracekit_file, ?MODULE]],
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                      args => lists:append([["-pa", P] || P <- Paths])}),
    OsPid = peer:call(Peer, os, getpid, []),
    ok = peer:call(Peer, ?MODULE, write_until_killed, [Path, self()]),
    timer:sleep(300),
    os:cmd("kill -9 " ++ OsPid),
    try peer:stop(Peer) catch _:_ -> ok end,
    %% Never complete: no end chunk, whether the cut fell between chunks
    %% or in one (it read as complete when it fell between them).
    {error, {corrupt, Path, Off}, Evs} = tracekit_file:read(Path),
    ct:log("read back ~p events; cut at ~p of ~p bytes",
           [length(Evs), Off, filelib:file_size(Path)]),
    Ns = [I || {trace, _, send, {n, I}, _} <- Evs],
    %% In order, each once (a full buffer may have refused some, counted
    %% in lost chunks).
    ?assert(length(Ns) > 1000),
    ?assertEqual(lists:usort(Ns), Ns).

%% On the peer: a process sending numbered messages forever, traced into
%% a file.
write_until_killed(Path, _Origin) ->
    {ok, F} = tracekit_file:new(#{path => Path}),
    spawn(fun() ->
                  S = trace:session_create(killed, {tracekit_file, F}, []),
                  P = spawn(fun() -> receive go -> ok end, send_forever(1) end),
                  1 = trace:process(S, P, true, [send]),
                  P ! go,
                  receive never -> S end
          end),
    ok.

send_forever(I) ->
    self() ! {n, I},
    receive {n, I} -> ok end,
    send_forever(I + 1).

%% Files damaged at random (cut short, or bytes changed), 10,000 of them:
%% the reader never crashes nor loops, gives only events the file really
%% holds, in order, then says where the damage is; skipping goes on after.
damaged_files(Config) ->
    Path = path(Config, "good.tkt"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    S = trace:session_create(damage, {tracekit_file, F}, []),
    Self = self(),
    P = spawn(fun() -> receive go -> ok end,
                       [begin self() ! {n, I, <<I:32>>}, tracekit_file:flush(F) end
                        || I <- lists:seq(1, 40)],
                       Self ! {done, self()} end),
    1 = trace:process(S, P, true, [send]),
    P ! go,
    receive {done, P} -> ok end,
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    {ok, Good} = file:read_file(Path),
    {ok, GoodEvs} = tracekit_file:read(Path),
    All = numbers(GoodEvs),
    ?assertEqual(lists:seq(1, 40), All),
    Bad = path(Config, "bad.tkt"),
    rand:seed(exsss, {11, 22, 33}),
    Outcomes = [damage_once(Good, Bad, All) || _ <- lists:seq(1, 10000)],
    Counts = lists:foldl(fun(O, M) -> maps:update_with(O, fun(N) -> N + 1 end, 1, M) end,
                         #{}, Outcomes),
    ct:log("outcomes of 10000 damaged files: ~p", [Counts]),
    %% Every damage is found: a cut at a chunk's end too (it read as a
    %% complete file).
    ?assertEqual([corrupt, not_a_trace], lists:sort(maps:keys(Counts))),
    ?assert(maps:get(corrupt, Counts, 0) > 9000).

damage_once(Good, Bad, All) ->
    Size = byte_size(Good),
    Damaged = case rand:uniform(3) of
                  1 -> binary:part(Good, 0, rand:uniform(Size) - 1);
                  _ -> flip(Good, rand:uniform(4))
              end,
    ok = file:write_file(Bad, Damaged),
    Self = self(),
    {Pid, Mon} = spawn_monitor(fun() -> Self ! {self(), read_both(Bad)} end),
    receive
        {Pid, {Stop, Skip}} ->
            demonitor(Mon, [flush]),
            check_damaged(Stop, Skip, All, Bad)
    after 10000 ->
            exit(Pid, kill),
            error({reader_hangs, Damaged})
    end.

read_both(Bad) ->
    {tracekit_file:read(Bad),
     tracekit_file:fold(fun(E, Acc) -> [E | Acc] end, [], Bad, #{damaged => skip})}.

%% Bytes changed at N random places.
flip(Bin, 0) ->
    Bin;
flip(Bin, N) ->
    At = rand:uniform(byte_size(Bin)) - 1,
    <<Pre:At/binary, B, Post/binary>> = Bin,
    flip(<<Pre/binary, (B bxor (rand:uniform(255))), Post/binary>>, N - 1).

check_damaged({error, {corrupt, Bad, Off}, Evs}, {_, Reason, SkipAcc}, All, Bad)
  when is_integer(Off) ->
    Ns = numbers(Evs),
    ?assertEqual(lists:sublist(All, length(Ns)), Ns),
    %% Skipping reads at least as much, only events that were there, in
    %% order, and says what it skipped.
    Skipped = numbers(lists:reverse(SkipAcc)),
    ?assert(length(Skipped) >= length(Ns)),
    ?assertEqual(Skipped, [I || I <- All, lists:member(I, Skipped)]),
    ?assertMatch({skipped, [_ | _]}, Reason),
    corrupt;
check_damaged({error, {file, Bad, not_a_trace}, []}, _, _, Bad) ->
    not_a_trace.

%% A peer whose process has a file size limit (ulimit -S -f, in KiB: the
%% soft limit, which the process may raise again), and
%% keeps SIGXFSZ's default action (the end of the process). (+JMsingle:
%% the JIT's code in one mapping; the dual mapping sizes a memory file of
%% 64 MiB when the VM starts, which a smaller limit refuses.)
limited_peer(Kib) ->
    Paths = [filename:dirname(code:which(M)) || M <- [tracekit_file, ?MODULE]],
    Sh = "ulimit -S -f " ++ integer_to_list(Kib) ++ "; exec \"$0\" \"$@\"",
    Erl = os:find_executable("erl"),
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                      exec => {"/bin/sh", ["-c", Sh, Erl]},
                                      args => ["+JMsingle", "true"]
                                          ++ lists:append([["-pa", P] || P <- Paths])}),
    Peer.

%% A disk that fills (here a file size limit of the peer's process): the
%% VM keeps running, write errors and drops are counted, close returns.
%% The limit raises SIGXFSZ, whose default action killed the VM (the test
%% ignored the signal in the shell that started the peer): the writer
%% thread, and new/1 while it writes the first chunks, hold it back, so
%% that the write fails with EFBIG.
disk_fills(Config) ->
    Path = path(Config, "full.tkt"),
    Peer = limited_peer(2048),
    try
        Stats = peer:call(Peer, ?MODULE, fill_disk, [Path], 60000),
        ct:log("~p", [Stats]),
        #{write_errors := E, dropped := D, written := W, last_error := Why,
          buffered := 0} = Stats,
        ?assert(E > 0),
        ?assert(D > 0),
        ?assert(W > 0),
        ?assertEqual(efbig, Why),
        ?assertEqual(100001, W + D), % and the done message
        ?assert(filelib:file_size(Path) =< 2048 * 1024),
        ?assertEqual(4, peer:call(Peer, erlang, '+', [2, 2])), % still running
        %% What reached the file reads back: exactly the events written
        %% (a chunk the limit refused left nothing; a smaller one later
        %% may still have fitted).
        Evs = case tracekit_file:read(Path) of
                  {ok, Es} -> Es;
                  {error, {corrupt, Path, _}, Es} -> Es
              end,
        ?assertEqual(W, length(Evs)),
        Ns = numbers(Evs),
        ?assertEqual(Ns, lists:usort(Ns))
    after
        peer:stop(Peer)
    end,
    %% No room at all: new/1 (on a scheduler) cannot write the magic.
    Zero = limited_peer(0),
    try
        Z = path(Config, "no_room.tkt"),
        ?assertEqual({error, {file, Z, efbig}}, peer:call(Zero, tracekit_file, new, [#{path => Z}])),
        ?assertEqual(4, peer:call(Zero, erlang, '+', [2, 2]))
    after
        peer:stop(Zero)
    end,
    %% A device that is full from the start: the path cannot be made.
    case filelib:is_file("/dev/full") of
        true -> ?assertEqual({error, {file, "/dev/full", enospc}},
                             tracekit_file:new(#{path => "/dev/full"}));
        false -> ok
    end.

fill_disk(Path) ->
    {ok, F} = tracekit_file:new(#{path => Path}),
    S = trace:session_create(full, {tracekit_file, F}, []),
    Self = self(),
    P = spawn(fun() -> receive go -> ok end,
                       [self() ! {n, I, binary:copy(<<I:32>>, 8)} || I <- lists:seq(1, 100000)],
                       Self ! {done, self()} end),
    1 = trace:process(S, P, true, [send]),
    P ! go,
    receive {done, P} -> ok end,
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    tracekit_file:stats(F).

%% Bad paths and options: clear errors, before anything is traced.
bad_paths_and_options(Config) ->
    Dir = ?config(priv_dir, Config),
    Missing = filename:join([Dir, "no", "such", "dir", "t.tkt"]),
    ?assertEqual({error, {file, Missing, enoent}}, tracekit_file:new(#{path => Missing})),
    ReadOnly = filename:join(Dir, "ro"),
    ok = file:make_dir(ReadOnly),
    ok = file:change_mode(ReadOnly, 8#500),
    InRo = filename:join(ReadOnly, "t.tkt"),
    case os:getenv("USER") =:= "root" orelse os:cmd("id -u") =:= "0\n" of
        true -> ok; % root writes anywhere
        false -> ?assertEqual({error, {file, InRo, eacces}}, tracekit_file:new(#{path => InRo}))
    end,
    ?assertEqual({error, {file, Dir, eisdir}}, tracekit_file:new(#{path => Dir})),
    P = path(Config, "opts.tkt"),
    Bad = [{wrap, {100, 3}}, {wrap, {16384, 0}}, {wrap, x}, {max_bytes, 0},
           {max_bytes, -1}, {buffer, 1000}, {buffer, 1 bsl 40}, {payload, huge},
           {tags, [nope]}, {tags, [send | x]}, {nonsense, 1},
           {max_events, 0}, {max_events, x}, {rate, {0, 10}}, {rate, {10, 0}},
           {rate, {1000001, 10}}, {rate, {10, 86400001}}, {rate, 10}],
    [?assertEqual({error, {badopt, O}}, tracekit_file:new(maps:from_list([{path, P}, O])))
     || O <- Bad],
    ?assertEqual({error, {badopt, {path, missing}}}, tracekit_file:new(#{})),
    ?assertEqual({error, {badopt, {path, <<>>}}}, tracekit_file:new(#{path => <<>>})),
    ?assertEqual({error, {badopt, {path, 42}}}, tracekit_file:new(#{path => 42})),
    ?assertEqual({error, {badopt, nonsense}}, tracekit_file:new(nonsense)),
    %% Readers: a missing file, a file that is not a trace.
    ?assertEqual({error, {no_files, Missing}, []}, tracekit_file:read(Missing)),
    NotTrace = path(Config, "not_a_trace"),
    ok = file:write_file(NotTrace, <<"hello">>),
    ?assertEqual({error, {file, NotTrace, not_a_trace}, []}, tracekit_file:read(NotTrace)),
    %% Its NIFs refuse what is not a file.
    ?assertError(badarg, tracekit_file:stats(make_ref())),
    ?assertError(badarg, tracekit_file:close(self())),
    ?assertError(badarg, tracekit_file:flush(<<>>)).

%% max_events and rate: the writer keeps the first events in time order up
%% to the limit and counts the rest as over (not dropped); stats say which
%% limit was reached, and every event is accounted for.
limits(Config) ->
    Path = path(Config, "limits.tkt"),
    {ok, F} = tracekit_file:new(#{path => Path, max_events => 100}),
    #{limit := none, over := 0} = tracekit_file:stats(F),
    S = traced_sends({tracekit_file, F}, 1000),
    ok = tracekit_file:flush(F),
    #{written := 100, dropped := 0, over := 901, buffered := 0,
      limit := {max_events, 100}} = tracekit_file:stats(F),
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    {ok, Evs} = tracekit_file:read(Path),
    ?assertEqual(lists:seq(1, 100), numbers(Evs)),
    %% 50 events within any 10 s: the 51st ends the file.
    {ok, R} = tracekit_file:new(#{path => Path, rate => {50, 10000}}),
    S2 = traced_sends({tracekit_file, R}, 1000),
    ok = tracekit_file:flush(R),
    #{written := 50, over := 951, limit := {rate, {50, 10000}}} = tracekit_file:stats(R),
    trace:session_destroy(S2),
    ok = tracekit_file:close(R),
    {ok, Evs2} = tracekit_file:read(Path),
    ?assertEqual(lists:seq(1, 50), numbers(Evs2)),
    %% Spaced out, a rate does not end the file.
    {ok, R3} = tracekit_file:new(#{path => Path, rate => {2, 20}}),
    S3 = trace:session_create(file_suite, {tracekit_file, R3}, []),
    1 = trace:process(S3, self(), true, [send]),
    [begin self() ! {n, I, <<>>}, timer:sleep(25) end || I <- lists:seq(1, 6)],
    trace:session_destroy(S3),
    ok = tracekit_file:close(R3),
    #{written := 6, over := 0, limit := none} = tracekit_file:stats(R3),
    {ok, Evs3} = tracekit_file:read(Path),
    ?assertEqual([1, 2, 3, 4, 5, 6], numbers(Evs3)).

%% Trace files hold message contents: each is made new with mode 8#600
%% (whatever the umask), or exactly the `mode' asked for; an earlier trace
%% file of ours at the path is replaced, anything else there is refused
%% and left as it was (a file, a symbolic link and what it points to).
files_are_private(Config) ->
    Mode = fun(P) -> {ok, I} = file:read_link_info(P), element(8, I) band 8#7777 end,
    Path = path(Config, "private.tkt"),
    Old = os:cmd("umask"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    ok = tracekit_file:close(F),
    ?assertEqual(8#600, Mode(Path)),
    [begin
         {ok, G} = tracekit_file:new(#{path => Path, mode => M}),
         ok = tracekit_file:close(G),
         ?assertEqual(M, Mode(Path))
     end || M <- [8#640, 8#644, 8#660, 8#666, 8#600]],
    [?assertEqual({error, {badopt, {mode, M}}}, tracekit_file:new(#{path => Path, mode => M}))
     || M <- [8#700, 8#400, 8#200, 8#601, 8#1600, 8#4600, 8#777, -1, 1 bsl 70, x, "600"]],
    %% Every file of a wrap set.
    Base = path(Config, "private_set"),
    {ok, W} = tracekit_file:new(#{path => Base, wrap => {4096, 3}, mode => 8#640}),
    S = traced_sends({tracekit_file, W}, 3000),
    trace:session_destroy(S),
    ok = tracekit_file:close(W),
    #{files := NFiles} = tracekit_file:stats(W),
    ?assert(NFiles > 3),
    Set = filelib:wildcard(Base ++ ".*"),
    ?assertEqual(3, length(Set)),
    [?assertEqual(8#640, Mode(P)) || P <- Set],
    %% Something else at the path: refused, nothing changed.
    Other = path(Config, "other.txt"),
    ok = file:write_file(Other, <<"not a trace">>),
    ?assertEqual({error, {file, Other, eexist}}, tracekit_file:new(#{path => Other})),
    ?assertEqual({ok, <<"not a trace">>}, file:read_file(Other)),
    Link = path(Config, "link.tkt"),
    ok = file:make_symlink(Other, Link),
    ?assertEqual({error, {file, Link, eexist}}, tracekit_file:new(#{path => Link})),
    ?assertEqual({ok, <<"not a trace">>}, file:read_file(Other)),
    %% A link to a trace file of ours is not followed either.
    ok = file:delete(Link),
    ok = file:make_symlink(Path, Link),
    {ok, Before} = file:read_file(Path),
    ?assertEqual({error, {file, Link, eexist}}, tracekit_file:new(#{path => Link})),
    ?assertEqual({ok, Before}, file:read_file(Path)),
    %% The first file of a set behind a link.
    ok = file:make_symlink(Other, path(Config, "linkset.0")),
    ?assertEqual({error, {file, path(Config, "linkset"), eexist}},
                 tracekit_file:new(#{path => path(Config, "linkset"), wrap => {8192, 2}})),
    ?assertEqual({ok, <<"not a trace">>}, file:read_file(Other)),
    ?assertEqual(Old, os:cmd("umask")).

%% private_dir/2: a new directory of mode 8#700 with a name nobody could
%% guess, never one that existed; errors say why.
private_dirs(Config) ->
    Dir = ?config(priv_dir, Config),
    Made = [begin {ok, D} = tracekit_file:private_dir(Dir, "tk-"), D end
            || _ <- lists:seq(1, 500)],
    ?assertEqual(500, length(lists:usort(Made))),
    [begin
         ?assertEqual(string:trim(Dir, trailing, "/"), filename:dirname(D)),
         "tk-" ++ Rand = filename:basename(D),
         ?assertEqual(12, length(Rand)),
         ?assert(lists:all(fun(C) -> (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                                         orelse (C >= $0 andalso C =< $9) end, Rand)),
         {ok, I} = file:read_link_info(D),
         ?assertEqual(directory, element(3, I)),
         ?assertEqual(8#700, element(8, I) band 8#7777)
     end || D <- Made],
    %% A binary parent gives a binary; no prefix at all is a name too.
    {ok, B} = tracekit_file:private_dir(list_to_binary(Dir), <<>>),
    ?assert(is_binary(B)),
    ?assertEqual(12, byte_size(filename:basename(B))),
    %% Trace files go in it.
    {ok, F} = tracekit_file:new(#{path => filename:join(B, "t.tkt")}),
    ok = tracekit_file:close(F),
    NotDir = path(Config, "plain_file"),
    ok = file:write_file(NotDir, <<>>),
    ?assertEqual({error, enotdir}, tracekit_file:private_dir(NotDir, "x")),
    ?assertEqual({error, enoent}, tracekit_file:private_dir(path(Config, "no/such"), "x")),
    ?assertEqual({error, einval}, tracekit_file:private_dir(Dir, "a/b")),
    ?assertEqual({error, einval}, tracekit_file:private_dir(42, "x")),
    ?assertEqual({error, einval}, tracekit_file:private_dir(Dir, self())),
    ?assertEqual({error, einval}, tracekit_file:private_dir("", "x")).

%% close/1 while 16 processes record on 8 schedulers: an event that a
%% callback began to record as close/1 ran was pushed after the writer's
%% last drain, never written, yet counted as buffered (13 of 200 closes;
%% with messages that take a while to encode, as here, nearly every close
%% left some). Once close/1 returns nothing more is recorded or counted:
%% the stats do not change, nothing is buffered, and the file holds
%% `written' events. Each recording process gives up its scheduler after
%% each send (bump_reductions): its event costs it a few reductions but
%% long to encode, so it kept a scheduler for a whole time slice and the
%% 2 and 10 ms waits of each close lasted hundreds of ms (20 s for the 40
%% closes, 44 s under ASan); its events, as slow as before, are still
%% being recorded on every scheduler when close/1 runs.
close_while_recording(Config) ->
    Dir = ?config(priv_dir, Config),
    Paths = [filename:dirname(code:which(M)) || M <- [tracekit_file, ?MODULE]],
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                      args => ["+S", "8:8"]
                                          ++ lists:append([["-pa", P] || P <- Paths])}),
    try
        Bad = peer:call(Peer, ?MODULE, close_cycles, [Dir, 40], 300000),
        ct:log("closes whose stats moved or did not add up: ~p", [Bad]),
        ?assertEqual([], Bad)
    after
        peer:stop(Peer)
    end.

close_cycles(Dir, N) ->
    Path = filename:join(Dir, "close_race.tkt"),
    Msg = lists:seq(1, 3000),
    Ps = [spawn(fun Loop() ->
                        self() ! Msg,
                        receive _ -> ok end,
                        erlang:bump_reductions(1000),
                        Loop()
                end)
          || _ <- lists:seq(1, 16)],
    Bad = lists:append(
            [begin
                 {ok, F} = tracekit_file:new(#{path => Path, buffer => 65536}),
                 %% (The tracer of a legacy trace is replaced in the next
                 %% round: cheaper than a session per round.)
                 [1 = erlang:trace(P, true, [send, {tracer, tracekit_file, F}]) || P <- Ps],
                 timer:sleep(2),
                 ok = tracekit_file:close(F),
                 Closed = tracekit_file:stats(F),
                 timer:sleep(10),
                 Later = tracekit_file:stats(F),
                 #{written := W, buffered := B} = Closed,
                 %% The file holds `written' events (read in one round of 10:
                 %% reading takes much longer than a round).
                 Read = case I rem 10 of
                            0 -> tracekit_file:fold(fun(_, A) -> A + 1 end, 0, Path);
                            _ -> {ok, W}
                        end,
                 case Closed =:= Later andalso B =:= 0 andalso Read =:= {ok, W} of
                     true -> [];
                     false -> [{I, Closed, Later, Read}]
                 end
             end || I <- lists:seq(1, N)]),
    [exit(P, kill) || P <- Ps],
    Bad.

%% A disk that fills, then has room again (here the peer's file size limit
%% reached, then lifted with prlimit): a write that stopped part way left
%% its part of a chunk in the file, and every event after it was
%% unreadable (452,400 written, 78,988 read). Now the file ends at its
%% last whole chunk until there is room, and reads to its end: every event
%% written, exactly.
room_again(Config) ->
    Path = path(Config, "room_again.tkt"),
    Peer = limited_peer(1024),
    try
        Stats = peer:call(Peer, ?MODULE, fill_then_room, [Path], 120000),
        ct:log("~p", [Stats]),
        #{written := W, dropped := D, write_errors := E, buffered := 0} = Stats,
        ?assert(E > 0),
        ?assertEqual(200002, W + D), % and the two done messages
        ?assert(filelib:file_size(Path) > 1024 * 1024),
        {ok, Evs} = tracekit_file:read(Path),
        ?assertEqual(W, length(Evs)),
        Ns = numbers(Evs),
        ?assertEqual(Ns, lists:usort(Ns)),
        ?assert(lists:max(Ns) > 100000) % events from after the room came back
    after
        peer:stop(Peer)
    end.

fill_then_room(Path) ->
    {ok, F} = tracekit_file:new(#{path => Path}),
    S = trace:session_create(room, {tracekit_file, F}, []),
    Send = fun(From, To) ->
                   Self = self(),
                   P = spawn(fun() -> receive go -> ok end,
                                      [self() ! {n, I, binary:copy(<<I:32>>, 8)}
                                       || I <- lists:seq(From, To)],
                                      Self ! {done, self()} end),
                   1 = trace:process(S, P, true, [send]),
                   P ! go,
                   receive {done, P} -> ok end
           end,
    Send(1, 100000),
    ok = tracekit_file:flush(F),
    #{write_errors := E} = tracekit_file:stats(F),
    true = E > 0,
    "" = os:cmd("prlimit --pid " ++ os:getpid() ++ " --fsize=unlimited"),
    Send(100001, 200000),
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    tracekit_file:stats(F).

%% A file is complete when its last chunk is its end chunk (FORMAT.md).
%% Without it (a killed writer; here the end chunk cut off by hand) the
%% file read as complete; now every event is given and the result says
%% where the file ends. A chunk after the end chunk is damage. Every file
%% of a wrap set ends with its end chunk (rotation ends the file it
%% leaves), so that a set reads as complete.
cut_files_say_so(Config) ->
    Path = path(Config, "whole.tkt"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    S = traced_sends({tracekit_file, F}, 300),
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    {ok, All} = tracekit_file:read(Path),
    ?assertEqual(301, length(All)),
    {ok, Bin} = file:read_file(Path),
    EndAt = byte_size(Bin) - end_chunk_size(Bin),
    Cut = path(Config, "no_end.tkt"),
    ok = file:write_file(Cut, binary:part(Bin, 0, EndAt)),
    ?assertEqual({error, {corrupt, Cut, EndAt}, All}, tracekit_file:read(Cut)),
    ?assertEqual({error, {skipped, [{Cut, EndAt, eof}]}, lists:reverse(All)},
                 tracekit_file:fold(fun(E, A) -> [E | A] end, [], Cut, #{damaged => skip})),
    {error, {corrupt, Cut, EndAt}, 301} = tracekit_file:format(Cut, #{io => ct_io()}),
    %% A chunk after the end chunk.
    After = path(Config, "after_end.tkt"),
    ok = file:write_file(After, [Bin, binary:part(Bin, 8, EndAt - 8)]),
    ?assertMatch({error, {corrupt, After, Size}, All} when Size =:= byte_size(Bin),
                 tracekit_file:read(After)),
    %% Several files: the merge stops where the cut file ends (as at any
    %% damage), and skipping reads them all.
    {error, {corrupt, Cut, EndAt}, _} = tracekit_file:read([Path, Cut]),
    {error, {skipped, [{Cut, EndAt, eof}]}, Both} =
        tracekit_file:fold(fun(E, A) -> [E | A] end, [], [Path, Cut], #{damaged => skip}),
    ?assertEqual(602, length(Both)),
    %% A wrap set: each of its files ends with an end chunk.
    Base = path(Config, "ended_set"),
    {ok, W} = tracekit_file:new(#{path => Base, wrap => {8192, 3}}),
    S2 = traced_sends({tracekit_file, W}, 3000),
    trace:session_destroy(S2),
    ok = tracekit_file:close(W),
    #{files := Files, written := Written} = tracekit_file:stats(W),
    ?assert(Files > 3),
    Set = lists:sort(filelib:wildcard(Base ++ ".*")),
    [?assertEqual(5, lists:last(chunk_types(P))) || P <- Set],
    {ok, SetEvs} = tracekit_file:read(Base),
    ?assertEqual(Written, length(SetEvs)),
    %% A file of the set cut before its magic was whole (its writer killed
    %% as it made it): the set was refused as holding a file that is not a
    %% trace; it is damaged from that file's start.
    [First | _] = Set,
    [begin
         ok = file:write_file(First, Bytes),
         ?assertEqual({error, {corrupt, First, 0}, []}, tracekit_file:read(First)),
         {error, {skipped, [{First, 0, eof}]}, Rest} =
             tracekit_file:fold(fun(E, A) -> [E | A] end, [], Base, #{damaged => skip}),
         ?assert(length(Rest) > 0)
     end || Bytes <- [<<>>, <<"TKTR">>, <<"TKTRACE">>]],
    %% The writer takes such a file for its own (it was one): a new set at
    %% the base replaces it (it was left, and new/1 refused the name).
    {ok, W2} = tracekit_file:new(#{path => Base, wrap => {8192, 3}}),
    S3 = traced_sends({tracekit_file, W2}, 10),
    trace:session_destroy(S3),
    ok = tracekit_file:close(W2),
    {ok, NewEvs} = tracekit_file:read(Base),
    ?assertEqual(11, length(NewEvs)),
    ok = file:write_file(First, <<"TKTRACE3">>),
    ?assertEqual({error, {file, First, not_a_trace}, []}, tracekit_file:read(First)).

%% The bytes of a file's last chunk (its end chunk).
end_chunk_size(Bin) ->
    lists:last(chunk_sizes(Bin, 8)).

chunk_sizes(Bin, At) when At < byte_size(Bin) ->
    <<_:At/binary, 16#4B434B54:32/little, _Type, _, _:16, L:32/little, _/binary>> = Bin,
    [16 + L | chunk_sizes(Bin, At + 16 + L)];
chunk_sizes(_, _) ->
    [].

chunk_types(Path) ->
    {ok, <<"TKTRACE2", Rest/binary>>} = file:read_file(Path),
    chunk_types(Rest, []).

chunk_types(<<>>, Acc) ->
    lists:reverse(Acc);
chunk_types(<<16#4B434B54:32/little, Type, _, _:16, L:32/little, _:32, _:L/binary,
              Rest/binary>>, Acc) ->
    chunk_types(Rest, [Type | Acc]).

%% A file of version 1 of the format (FORMAT.md: fixed-width numbers),
%% written by the tracer before version 2 (test data: sends of integers
%% of every size, a float, binaries, a bitstring, a string, an improper
%% list, a map, a reference, a fun, a pid, with timestamps), reads back
%% as the events it was written with: through read/1 and through
%% tracekit-cat's dbg format, the same terms.
version_1_files(Config) ->
    Data = ?config(data_dir, Config),
    Path = filename:join(Data, "v1.tktrace"),
    {ok, <<"TKTRACE1", _/binary>>} = file:read_file(Path),
    {ok, Bin} = file:read_file(Path ++ ".terms"),
    Expected = binary_to_term(Bin),
    ?assertEqual(18, length(Expected)),
    ?assertEqual({ok, Expected}, tracekit_file:read(Path)),
    Cat = filename:join(code:priv_dir(tracekit), "bin/tracekit-cat"),
    Out = filename:join(?config(priv_dir, Config), "v1.dbg"),
    Port = open_port({spawn_executable, Cat},
                     [{args, ["--format", "dbg", "-o", Out, Path]}, exit_status]),
    receive {Port, {exit_status, St}} -> ?assertEqual(0, St) end,
    {ok, Dbg} = file:read_file(Out),
    ?assertEqual(Expected, [binary_to_term(T) || <<0, L:32, T:L/binary>> <= Dbg]).
