%% tracekit_file used as a hostile user would: paths that are FIFOs,
%% files crafted to look like trace files, sizes at their limits, base
%% names in every form, and a file resource dropped while its writer still
%% has much to write.
-module(tracekit_file_hostile_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_testcase/2, end_per_testcase/2]).
-export([fifo_paths/1, crafted_records/1, crafted_headers/1,
         max_bytes_ends_the_file/1, source_names/1, freed_while_writing/1,
         new_and_drop_cycles/1, symlink_attack/1, expanding_references/1,
         deep_terms_one_rule/1, upgrade_from_another_directory/1,
         writer_keeps_the_bound/1]).
-export([read_crafted/1, drop_while_writing/2, fill_and_forget/1, count_on_peer/1,
         upgrade_on_peer/3]).

all() ->
    [fifo_paths, crafted_records, crafted_headers, max_bytes_ends_the_file,
     source_names, freed_while_writing, new_and_drop_cycles, symlink_attack,
     expanding_references, deep_terms_one_rule, upgrade_from_another_directory,
     writer_keeps_the_bound].

init_per_testcase(_, Config) ->
    Config.

end_per_testcase(_, _) ->
    ok.

path(Config, Name) ->
    filename:join(?config(priv_dir, Config), Name).

%% F() in a process of its own, or hang after Ms.
within(Ms, F) ->
    Self = self(),
    P = spawn(fun() -> Self ! {self(), F()} end),
    receive
        {P, R} -> R
    after Ms ->
        exit(P, kill),
        hang
    end.

peer(Args) ->
    Paths = [filename:dirname(code:which(M)) || M <- [tracekit_file, ?MODULE]],
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                      args => Args ++ lists:append([["-pa", P] || P <- Paths])}),
    Peer.

%% A FIFO as the file to write or to read: opening one waits for the other
%% end, and that wait must not be a scheduler's (new/1 and the reader ran
%% on dirty I/O schedulers, stuck there for good). Writing to one is
%% refused: its reader could make close/1 wait forever.
fifo_paths(Config) ->
    Fifo = path(Config, "fifo"),
    "" = os:cmd("mkfifo " ++ Fifo),
    ?assertEqual({error, {file, Fifo, espipe}},
                 within(5000, fun() -> tracekit_file:new(#{path => Fifo}) end)),
    %% The first file of a wrap set.
    "" = os:cmd("mkfifo " ++ Fifo ++ "set.0"),
    ?assertEqual({error, {file, Fifo ++ "set", espipe}},
                 within(5000, fun() -> tracekit_file:new(#{path => Fifo ++ "set",
                                                            wrap => {8192, 2}}) end)),
    ?assertEqual({error, not_a_trace},
                 within(5000, fun() -> tracekit_file:reader_open(list_to_binary(Fifo)) end)),
    %% A FIFO in a list of sources (files/1 leaves it out when it is not a
    %% regular file, the reader refuses it when it is given as one).
    ?assertMatch({error, _, []},
                 within(5000, fun() -> tracekit_file:read([Fifo]) end)),
    %% With a reader at the other end: refused as well, and nothing waits.
    %% (No shell: the port's program is cat itself, waiting in open().)
    Port = open_port({spawn_executable, os:find_executable("cat")}, [{args, [Fifo]}]),
    {os_pid, Cat} = erlang:port_info(Port, os_pid),
    timer:sleep(200),
    ?assertEqual({ok, <<"cat\n">>},
                 file:read_file("/proc/" ++ integer_to_list(Cat) ++ "/comm")),
    ?assertEqual({error, {file, Fifo, espipe}},
                 within(5000, fun() -> tracekit_file:new(#{path => Fifo}) end)),
    %% cat has seen end of file, or still waits if the FIFO was never
    %% opened: killed either way, not left behind.
    _ = os:cmd("kill " ++ integer_to_list(Cat)),
    try port_close(Port) catch error:badarg -> ok end,
    %% Devices are files: /dev/null takes everything.
    {ok, F} = tracekit_file:new(#{path => "/dev/null"}),
    ok = tracekit_file:close(F).

%% ---- crafted files ------------------------------------------------------------

crc32c(Bin) ->
    bnot crc32c(Bin, 16#FFFFFFFF) band 16#FFFFFFFF.

crc32c(<<>>, C) -> C;
crc32c(<<B, R/binary>>, C) ->
    crc32c(R, lists:foldl(fun(_, X) when X band 1 =:= 1 -> (X bsr 1) bxor 16#82F63B78;
                             (_, X) -> X bsr 1
                          end, C bxor B, lists:seq(1, 8))).

chunk(Type, P) ->
    H = <<Type, 0, 0:16, (byte_size(P)):32/little>>,
    <<16#4B434B54:32/little, H/binary, (crc32c(<<H/binary, P/binary>>)):32/little, P/binary>>.

events_chunk(Recs) ->
    chunk(3, <<0:64, 0:64, (length(Recs)):32/little,
               (<< <<(byte_size(R)):32/little, 0:64, R/binary>> || R <- Recs >>)/binary>>).

%% The header of a real file, as a map.
real_header(Dir) ->
    Path = filename:join(Dir, "real.tkt"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    ok = tracekit_file:close(F),
    {ok, <<"TKTRACE2", 16#4B434B54:32/little, 1, _, _:16, L:32/little, C:32/little,
           P:L/binary, _/binary>>} = file:read_file(Path),
    ?assertEqual(C, crc32c(<<1, 0, 0:16, L:32/little, P/binary>>)),
    binary_to_term(P).

%% A crafted file: the magic, the chunks, and an end chunk (FORMAT.md: a
%% file without it was cut short).
write(Path, Chunks) ->
    write(Path, <<"TKTRACE2">>, Chunks).

write(Path, Magic, Chunks) ->
    ok = file:write_file(Path, [Magic, Chunks, chunk(5, term_to_binary(#{}))]),
    Path.

%% An unsigned varint (FORMAT.md).
uv(N) when N < 128 -> <<N>>;
uv(N) -> <<(N band 127 bor 128), (uv(N bsr 7))/binary>>.

%% Records whose terms are a VM's own words (tag 1, and tag 2 of version
%% 1, which never appear in a file): the reader took the words for terms,
%% and the VM crashed on the first one that was not a valid term. In files
%% of both versions. On a peer, so that a crash fails only this case.
crafted_records(Config) ->
    Dir = ?config(priv_dir, Config),
    H = chunk(1, term_to_binary(real_header(Dir))),
    Recs = [{"imm.tkt", <<"TKTRACE2">>,
             <<0, 0, 1, (uv(16#deadbeefcafe))/binary, 1, (uv(16#12345678fff))/binary>>},
            {"imm32.tkt", <<"TKTRACE2">>, <<0, 0, 2, 3, 2, 7>>},
            {"imm_deep.tkt", <<"TKTRACE2">>, <<0, 0, 8, 1, 1, 16#41, 0>>},
            {"imm_v1.tkt", <<"TKTRACE1">>,
             <<0, 0, 1, 16#deadbeefcafe:64/little, 1, 16#12345678fff:64/little>>},
            {"imm32_v1.tkt", <<"TKTRACE1">>, <<0, 0, 2, 3:32/little, 2, 7:32/little>>},
            {"imm_deep_v1.tkt", <<"TKTRACE1">>, <<0, 0, 8, 1:32/little, 1, 16#41:64/little, 0>>},
            %% The words of atoms and pids by their index (tags 15 and 16),
            %% and a timestamp as three varints (tag 17, for the kind
            %% `timestamp'): only a ring's records hold them.
            {"atom.tkt", <<"TKTRACE2">>,
             <<0, 0, 15, (uv(16#deadbeefcafe))/binary, 15, (uv(16#3ffffff))/binary>>},
            {"pid.tkt", <<"TKTRACE2">>,
             <<0, 0, 16, (uv(16#deadbeefcafe))/binary, 16, (uv(16#123456789))/binary>>},
            {"atom_deep.tkt", <<"TKTRACE2">>, <<0, 0, 8, 1, 15, (uv(1 bsl 40))/binary, 0>>},
            {"now.tkt", <<"TKTRACE2">>, <<16#10, 0, 3, 2, 3, 4, 17, 1, 2, 3>>}],
    Files = [write(filename:join(Dir, N), M, [H, events_chunk([R])]) || {N, M, R} <- Recs],
    Peer = peer([]),
    Results = peer:call(Peer, ?MODULE, read_crafted, [Files], 30000),
    peer:stop(Peer),
    [?assertEqual({error, {corrupt, File, 8 + byte_size(H)}, []}, R)
     || {File, R} <- lists:zip(Files, Results)],
    %% tracekit-cat (files of version 2) refuses them too, with the
    %% chunk's place.
    [begin
         {1, <<>>, E} = cat(Config, [File], 200000),
         ?assertMatch({match, _}, re:run(E, "a chunk that makes no sense at byte "
                                         ++ integer_to_list(8 + byte_size(H))))
     end || {File, {_, <<"TKTRACE2">>, _}} <- lists:zip(Files, Recs)].

read_crafted(Files) ->
    [tracekit_file:read(File) || File <- Files].

%% Headers whose numbers are not what the decoder takes (negative, too
%% big, not numbers): the file is damaged, not an exception out of read/1.
crafted_headers(Config) ->
    Dir = ?config(priv_dir, Config),
    Hd = real_header(Dir),
    Ev = events_chunk([]),
    Bad = [Hd#{anchor => {-1, -5}}, Hd#{anchor => {1 bsl 70, 0}},
           Hd#{anchor => {0, 1 bsl 64}}, Hd#{stamp_hz => foo},
           Hd#{stamp_hz => -1}, Hd#{stamp_hz => 1 bsl 64}, Hd#{anchor => x}],
    lists:foldl(
      fun(H, I) ->
              HChunk = chunk(1, term_to_binary(H)),
              File = write(filename:join(Dir, "hdr" ++ integer_to_list(I)), [HChunk, Ev]),
              ?assertEqual({error, {corrupt, File, 8}, []}, tracekit_file:read(File)),
              %% Skipping: the chunk after the header is read on.
              Next = 8 + byte_size(HChunk),
              {error, {skipped, [{File, 8, Next}]}, []} =
                  tracekit_file:fold(fun(E, A) -> [E | A] end, [], File, #{damaged => skip}),
              I + 1
      end, 0, Bad).

%% The types of the chunks of a file, in order.
chunk_types(Path) ->
    {ok, <<"TKTRACE2", Rest/binary>>} = file:read_file(Path),
    chunk_types(Rest, []).

chunk_types(<<>>, Acc) ->
    lists:reverse(Acc);
chunk_types(<<16#4B434B54:32/little, Type, _, _:16, L:32/little, _:32, _:L/binary,
              Rest/binary>>, Acc) ->
    chunk_types(Rest, [Type | Acc]).

%% max_bytes at its limit: too small for a header is a bad option (it was
%% {file, Path, enomem}); a file that reaches it, once closed, still ends
%% with its end chunk (FORMAT.md: without one, the file was cut short), and
%% never holds more than max_bytes.
max_bytes_ends_the_file(Config) ->
    Path = path(Config, "max.tkt"),
    [?assertEqual({error, {badopt, {max_bytes, N}}},
                  tracekit_file:new(#{path => Path, max_bytes => N}))
     || N <- [1, 30, 4095]],
    [begin
         {ok, F} = tracekit_file:new(#{path => Path, max_bytes => Max}),
         S = trace:session_create(max_bytes, {tracekit_file, F}, []),
         Self = self(),
         P = spawn(fun() -> receive go -> ok end,
                            [self() ! {n, I, <<I:256>>} || I <- lists:seq(1, 5000)],
                            Self ! {done, self()} end),
         1 = trace:process(S, P, true, [send]),
         P ! go,
         receive {done, P} -> ok end,
         trace:session_destroy(S),
         ok = tracekit_file:close(F),
         #{written := W, dropped := D, buffered := 0, over := 0, bytes := Bytes} =
             tracekit_file:stats(F),
         ?assertEqual(5001, W + D),
         ?assert(D > 0),
         ?assert(Bytes =< Max),
         ?assert(W > 0),
         ?assert(Bytes > Max - 1000), % filled up to its limit
         ?assertEqual(Bytes, filelib:file_size(Path)),
         Types = chunk_types(Path),
         ct:log("max_bytes ~p: ~p written, ~p dropped, chunks ~w", [Max, W, D, Types]),
         ?assertEqual(5, lists:last(Types)),
         ?assert(lists:member(4, Types)), % a lost chunk says events are missing
         {ok, Evs} = tracekit_file:read(Path),
         ?assertEqual(W, length(Evs))
     end || Max <- [4096, 5000, 20000]],
    %% A wrap set under max_bytes: the files it reaches end with their end
    %% chunks, and a set that reaches its size reads whole.
    [begin
         Base = path(Config, "max_set" ++ integer_to_list(Max)),
         {ok, F} = tracekit_file:new(#{path => Base, max_bytes => Max, wrap => {8192, 3}}),
         S = trace:session_create(max_bytes_set, {tracekit_file, F}, []),
         Self = self(),
         P = spawn(fun() -> receive go -> ok end,
                            [self() ! {n, I, <<I:256>>} || I <- lists:seq(1, 5000)],
                            Self ! {done, self()} end),
         1 = trace:process(S, P, true, [send]),
         P ! go,
         receive {done, P} -> ok end,
         trace:session_destroy(S),
         ok = tracekit_file:close(F),
         #{written := W, dropped := D, overwritten := O, bytes := Bytes} = tracekit_file:stats(F),
         ?assertEqual(5001, W + D + O),
         ?assert(Bytes =< Max),
         Set = filelib:wildcard(Base ++ ".*"),
         ct:log("max_bytes ~p, wrap set: ~p written ~p overwritten ~p dropped, chunks ~w",
                [Max, W, O, D, [chunk_types(X) || X <- lists:sort(Set)]]),
         [?assertEqual(5, lists:last(chunk_types(X))) || X <- Set],
         {ok, Evs} = tracekit_file:read(Base),
         ?assertEqual(W, length(Evs))
     end || Max <- [9000, 20000, 30000]],
    ok.

%% A source in every form a file name takes: a wrap set's base name as a
%% binary (it crashed in ++), an atom, a unicode name; and
%% terms that are no file name at all (a function clause in filename).
source_names(Config) ->
    Dir = ?config(priv_dir, Config),
    Base = filename:join(Dir, "wräp"),
    {ok, F} = tracekit_file:new(#{path => Base, wrap => {8192, 3}}),
    S = trace:session_create(names, {tracekit_file, F}, []),
    Self = self(),
    P = spawn(fun() -> receive go -> ok end,
                       [self() ! {n, I} || I <- lists:seq(1, 2000)],
                       Self ! {done, self()} end),
    1 = trace:process(S, P, true, [send]),
    P ! go,
    receive {done, P} -> ok end,
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    {ok, Evs} = tracekit_file:read(Base),
    ?assert(length(Evs) > 10),
    Bin = unicode:characters_to_binary(Base, unicode, file:native_name_encoding()),
    ?assertEqual({ok, Evs}, tracekit_file:read(Bin)),
    ?assertEqual({ok, Evs}, tracekit_file:read([Bin])),
    ?assertEqual({ok, Evs}, tracekit_file:read(list_to_atom(Base))),
    [?assertEqual({error, {no_files, T}, []}, tracekit_file:read(T))
     || T <- [42, {a, b}, self(), #{}, 1.5]],
    ?assertEqual({error, {no_files, <<"/no/such/base">>}, []},
                 tracekit_file:read(<<"/no/such/base">>)).

%% The last reference to a file dropped while its writer has a full
%% buffer to write: the resource's destructor waited for the writer, on
%% whichever scheduler freed it, for as long as writing took. On a peer
%% with one scheduler, a process that ticks every millisecond sees how
%% long the scheduler was held; the file is still ended by its writer.
freed_while_writing(Config) ->
    Path = path(Config, "freed.tkt"),
    Peer = peer(["+S", "1"]),
    Result = peer:call(Peer, ?MODULE, drop_while_writing, [Path, 64 bsl 20], 60000),
    peer:stop(Peer),
    {Gap, Drain, Buffered} = Result,
    ct:log("buffered ~p events, ended after ~p ms; the scheduler was held ~p ms at most",
           [Buffered, Drain, Gap]),
    ?assertEqual(5, lists:last(chunk_types(Path))),
    file:delete(Path),
    %% Only meaningful when writing took a while.
    ?assert(Drain >= 100 orelse Buffered < 20000),
    ?assert(Gap < max(50, Drain div 2)).

drop_while_writing(Path, Buffer) ->
    Self = self(),
    Holder = spawn(fun() -> fill_and_forget({Self, Path, Buffer}) end),
    Buffered = receive {filled, Holder, B} -> B end,
    Ticker = spawn(fun() -> tick(erlang:monotonic_time(millisecond), 0) end),
    timer:sleep(50),
    T0 = erlang:monotonic_time(millisecond),
    exit(Holder, kill), % its reference, the last, goes with it
    Drain = wait_end(Path, T0, 30000),
    Ticker ! {gap, self()},
    Gap = receive {gap, G} -> G end,
    {Gap, Drain, Buffered}.

fill_and_forget({Parent, Path, Buffer}) ->
    {ok, F} = tracekit_file:new(#{path => Path, buffer => Buffer}),
    S = trace:session_create(freed, {tracekit_file, F}, []),
    P = spawn(fun() -> send_loop(<<0:8000>>) end),
    1 = trace:process(S, P, true, [send]),
    %% Until the ring is full: the writer cannot keep up with this.
    wait_full(F, 200),
    exit(P, kill),
    trace:session_destroy(S),
    #{buffered := B} = tracekit_file:stats(F),
    Parent ! {filled, self(), B},
    receive never -> F end.

wait_full(_, 0) ->
    ok;
wait_full(F, N) ->
    case tracekit_file:stats(F) of
        #{dropped := D} when D > 0 -> ok;
        _ -> timer:sleep(10), wait_full(F, N - 1)
    end.

send_loop(B) ->
    self() ! B,
    receive _ -> ok end,
    send_loop(B).

tick(Last, Max) ->
    receive
        {gap, P} -> P ! {gap, Max}
    after 1 ->
        Now = erlang:monotonic_time(millisecond),
        tick(Now, max(Max, Now - Last))
    end.

%% Milliseconds from T0 until the file ends with its end chunk.
wait_end(Path, T0, Left) when Left > 0 ->
    case try lists:last(chunk_types(Path)) catch error:_ -> none end of
        5 -> erlang:monotonic_time(millisecond) - T0;
        _ -> timer:sleep(5), wait_end(Path, T0, Left - 5)
    end.

%% Files made and dropped without close, then made and closed, many
%% times: no thread, descriptor or memory stays behind (the writers of
%% dropped files end on their own and are joined later).
new_and_drop_cycles(Config) ->
    Path = path(Config, "cycle.tkt"),
    Count = fun(D) -> {ok, L} = file:list_dir(D), length(L) end,
    Cycle = fun() ->
                    [begin
                         {ok, _} = tracekit_file:new(#{path => Path, buffer => 4096}),
                         {ok, F} = tracekit_file:new(#{path => Path, buffer => 4096}),
                         ok = tracekit_file:close(F)
                     end || _ <- lists:seq(1, 200)],
                    erlang:garbage_collect(),
                    timer:sleep(300),
                    {ok, F} = tracekit_file:new(#{path => Path, buffer => 4096}),
                    ok = tracekit_file:close(F)
            end,
    Cycle(),
    Fds0 = Count("/proc/self/fd"),
    Threads0 = Count("/proc/self/task"),
    Mem0 = memory(),
    Cycle(),
    Cycle(),
    Fds1 = Count("/proc/self/fd"),
    Threads1 = Count("/proc/self/task"),
    Mem1 = memory(),
    ct:log("fds ~p -> ~p, threads ~p -> ~p, memory ~p -> ~p",
           [Fds0, Fds1, Threads0, Threads1, Mem0, Mem1]),
    ?assert(Fds1 =< Fds0 + 2),
    ?assert(Threads1 =< Threads0),
    ?assert(Mem1 < Mem0 + 4000000).

%% The VM's memory; 0 when it does not keep count (+Mea min, the
%% sanitizer build: allocations are malloc's).
memory() ->
    try erlang:memory(total)
    catch error:notsup -> 0
    end.

%% Another local user plants symbolic links where trace files are to be
%% made (in a directory of theirs), pointing at a file of ours: the trace
%% was written through the link, over our file. Now nothing is written
%% through a link: the file, the first file of a wrap set and a later one
%% the set reaches by rotating are refused, and our file is as it was. The
%% attacker is the user `nobody' (setpriv) when the tests run as root; as
%% any other user the attacker is that user itself, which the same rule
%% refuses (a link is never a trace file of ours).
symlink_attack(Config) ->
    Victim = path(Config, "victim"),
    ok = file:write_file(Victim, <<"secret">>),
    ok = file:change_mode(Victim, 8#600),
    {ok, Dir} = tracekit_file:private_dir("/tmp", "tk-attacker-"),
    As = case os:cmd("id -u") of
             "0\n" ->
                 ok = file:change_owner(Dir, 65534, 65534),
                 ok = file:change_mode(Dir, 8#755),
                 "setpriv --reuid=65534 --regid=65534 --clear-groups ";
             _ ->
                 ""
         end,
    ct:log("attacker: ~p", [As]),
    Plant = fun(Name) ->
                    Link = filename:join(Dir, Name),
                    "" = os:cmd(As ++ "ln -s " ++ Victim ++ " " ++ Link),
                    {ok, Victim} = file:read_link(Link),
                    {ok, Info} = file:read_link_info(Link),
                    ct:log("~s: owner ~p", [Link, element(10, Info)]),
                    Link
            end,
    Single = Plant("trace.tkt"),
    ?assertEqual({error, {file, Single, eexist}}, tracekit_file:new(#{path => Single})),
    _ = Plant("set.0"),
    Set = filename:join(Dir, "set"),
    ?assertEqual({error, {file, Set, eexist}},
                 tracekit_file:new(#{path => Set, wrap => {8192, 3}})),
    %% A later file of a set: its rotation into the link is a write error.
    Later = filename:join(Dir, "later"),
    _ = Plant("later.2"),
    {ok, F} = tracekit_file:new(#{path => Later, wrap => {4096, 3}}),
    S = trace:session_create(attack, {tracekit_file, F}, []),
    Self = self(),
    P = spawn(fun() -> receive go -> ok end,
                       [self() ! {n, I, <<I:256>>} || I <- lists:seq(1, 3000)],
                       Self ! {done, self()} end),
    1 = trace:process(S, P, true, [send]),
    P ! go,
    receive {done, P} -> ok end,
    trace:session_destroy(S),
    ok = tracekit_file:close(F),
    #{write_errors := Errors, files := Files, last_error := Why} = tracekit_file:stats(F),
    ct:log("rotations into the link: ~p files, ~p write errors (~p)", [Files, Errors, Why]),
    ?assert(Files >= 3),
    ?assert(Errors > 0),
    ?assertEqual(eexist, Why),
    ?assertEqual({ok, <<"secret">>}, file:read_file(Victim)),
    {ok, VInfo} = file:read_file_info(Victim),
    ?assertEqual(8#600, element(8, VInfo) band 8#7777),
    os:cmd("rm -rf " ++ Dir).

%% ---- what references stand for ------------------------------------------------

%% tracekit-cat, {Status, Stdout, Stderr}, with at most Kib KiB of address
%% space (the plain build: its memory is what it asks for; without the
%% sanitizer runtime that test-nif-asan preloads into the VMs, whose
%% shadow memory would not fit).
cat(Config, Args, Kib) ->
    Cat = filename:join(code:priv_dir(tracekit), "bin/tracekit-cat"),
    Dir = ?config(priv_dir, Config),
    Out = filename:join(Dir, "cat.out"),
    Err = filename:join(Dir, "cat.err"),
    Cmd = "env -u LD_PRELOAD /bin/sh -c 'ulimit -v " ++ integer_to_list(Kib) ++ "; exec "
        ++ Cat ++ " " ++ lists:join(" ", Args) ++ " >" ++ Out ++ " 2>" ++ Err ++ "'; echo $?",
    Status = list_to_integer(string:trim(os:cmd(lists:flatten(Cmd)))),
    {ok, O} = file:read_file(Out),
    {ok, E} = file:read_file(Err),
    {Status, O, E}.

%% A dictionary chunk of the given entries (numbered from 0).
dict_chunk(Entries) ->
    chunk(2, <<0:32/little, (length(Entries)):32/little,
               (<< <<(byte_size(E)):32/little, E/binary>> || E <- Entries >>)/binary>>).

%% N records {trace, Entry0, send, Entry0}: two references each (2 bytes
%% each: DICT and the entry's number).
referring_records(N) ->
    Rec = <<0, 0, 14, 0, 14, 0>>,
    lists:duplicate(N, Rec).

%% A file of 0.85 MB: one dictionary entry a string of 65,535 characters,
%% 33,000 records each referring to it. tracekit-cat decoded the chunk
%% into one buffer whose int index wrapped past 2 GiB (a segmentation
%% fault; 2 GB and 10 s for 32,000 records), and fold/3 copied the entry
%% whole for each reference until the VM could not allocate its heap. A
%% dictionary entry is an atom, a pid, a port or [] (what the writer
%% makes): both readers refuse this one, with the file and its offset.
%% With entries of the most a legal entry takes (an atom of 255
%% four-byte characters), the references of an events chunk stand for at
%% most 16 MiB: under it both readers read the file, the same events, in
%% bounded memory; over it both refuse the chunk. The exports read the
%% same way.
expanding_references(Config) ->
    Dir = ?config(priv_dir, Config),
    H = chunk(1, term_to_binary(real_header(Dir))),
    Str = term_to_binary(lists:duplicate(65535, $a)),
    Attack = write(filename:join(Dir, "expand.tkt"),
                   [H, dict_chunk([Str]), events_chunk(referring_records(33000))]),
    ct:log("~s: ~p bytes", [Attack, filelib:file_size(Attack)]),
    DictAt = 8 + byte_size(H),
    Peer = peer([]),
    try
        ?assertEqual({error, {corrupt, Attack, DictAt}, 0},
                     peer:call(Peer, ?MODULE, count_on_peer, [Attack], 60000)),
        ?assertEqual({error, {corrupt, Attack, DictAt}}, 
                     peer:call(Peer, tracekit_export, jsonl, [Attack, filename:join(Dir, "x.jsonl")],
                               60000))
    after
        peer:stop(Peer)
    end,
    {1, <<>>, E1} = cat(Config, [Attack], 200000),
    ?assertMatch({match, _}, re:run(E1, "expand.tkt: a chunk that makes no sense at byte "
                                    ++ integer_to_list(DictAt))),
    %% The longest legal entry, referred to by 2 x 8,000 records (16 MB)
    %% and by 2 x 9,000 (18 MB: over the bound).
    Long = term_to_binary(binary_to_atom(binary:copy(<<"😀"/utf8>>, 255))),
    ?assertEqual(1 + 1 + 2 + 1020, byte_size(Long)),
    [Under, Over] =
        [write(filename:join(Dir, Name), [H, dict_chunk([Long]), events_chunk(referring_records(N))])
         || {Name, N} <- [{"under.tkt", 8000}, {"over.tkt", 9000}]],
    Mem0 = memory(),
    {ok, Evs} = tracekit_file:read(Under),
    ?assertEqual(8000, length(Evs)),
    ?assert(memory() - Mem0 < 64 bsl 20),
    {0, Text, <<>>} = cat(Config, [Under], 200000),
    ?assertEqual(8000, length(binary:matches(Text, <<"\n">>))),
    EventsAt = DictAt + byte_size(dict_chunk([Long])),
    ?assertEqual({error, {corrupt, Over, EventsAt}, []}, tracekit_file:read(Over)),
    {1, <<>>, E2} = cat(Config, [Over], 200000),
    ?assertMatch({match, _}, re:run(E2, "stand for more than 16 MiB at byte "
                                    ++ integer_to_list(EventsAt))),
    {1, _, _} = cat(Config, ["--damaged", "skip", Over], 200000).

%% The writer keeps the bound it reads by: events full of references to
%% the longest atoms go into chunks whose references stand for at most 16
%% MiB (which both readers then read whole), and an event whose own
%% references stand for more is left out and counted as dropped.
writer_keeps_the_bound(Config) ->
    Dir = ?config(priv_dir, Config),
    Path = filename:join(Dir, "bound.tkt"),
    Long = fun(I) -> binary_to_atom(<<(binary:copy(<<"😀"/utf8>>, 250))/binary,
                                     (integer_to_binary(10000 + I))/binary>>) end,
    Atoms = [Long(I) || I <- lists:seq(1, 300)],
    {ok, F} = tracekit_file:new(#{path => Path}),
    Me = self(),
    [ok = tracekit_file:trace(send, F, Me, Atoms, #{extra => Me}) || _ <- lists:seq(1, 200)],
    ok = tracekit_file:trace(send, F, Me, lists:duplicate(20000, hd(Atoms)), #{extra => Me}),
    ok = tracekit_file:trace(send, F, Me, last, #{extra => Me}),
    ok = tracekit_file:close(F),
    #{written := 201, dropped := 1} = tracekit_file:stats(F),
    {ok, Evs} = tracekit_file:read(Path),
    ?assertEqual(201, length(Evs)),
    ?assertEqual({trace, Me, send, last, Me}, lists:last(Evs)),
    %% 200 x 300 references of about 1 KiB: 60 MB in four chunks or more.
    Chunks = length([T || T <- chunk_types(Path), T =:= 3]),
    ct:log("~p events chunks", [Chunks]),
    ?assert(Chunks >= 4),
    {0, Text, <<>>} = cat(Config, [Path], 400000),
    %% A line per event, and one for the event left out (its lost chunk).
    Lines = binary:split(Text, <<"\n">>, [global, trim]),
    {Lost, EventLines} = lists:partition(fun(L) -> binary:match(L, <<"-- ">>) =:= {0, 3} end,
                                         Lines),
    ?assertEqual(201, length(EventLines)),
    ?assertMatch([<<"-- 1 events lost", _/binary>>], Lost).

count_on_peer(Path) ->
    tracekit_file:fold(fun(_, N) -> N + 1 end, 0, Path).

%% One rule for both readers on nesting: a dictionary entry nested
%% 100,000 deep was read by read/1 and refused by tracekit-cat; an
%% external term in a record nested deeper than a record may nest (200)
%% is refused by both; a fun whose environment nests deeper is written
%% as '...', which both read.
deep_terms_one_rule(Config) ->
    Dir = ?config(priv_dir, Config),
    H = chunk(1, term_to_binary(real_header(Dir))),
    Deep = fun(D) -> lists:foldl(fun(_, A) -> {A} end, x, lists:seq(1, D)) end,
    Entry = write(filename:join(Dir, "deep_entry.tkt"),
                  [H, dict_chunk([term_to_binary(Deep(100000))]),
                   events_chunk(referring_records(1))]),
    ?assertEqual({error, {corrupt, Entry, 8 + byte_size(H)}, []}, tracekit_file:read(Entry)),
    {1, <<>>, _} = cat(Config, [Entry], 200000),
    [begin
         Ext = term_to_binary(Deep(D)),
         Rec = <<0, 0, 12, 10, (uv(byte_size(Ext)))/binary, Ext/binary>>,
         File = write(filename:join(Dir, "deep_ext" ++ integer_to_list(D) ++ ".tkt"),
                      [H, events_chunk([Rec])]),
         case D =< 200 of
             true ->
                 {ok, [{trace, '...', _, Got}]} = tracekit_file:read(File),
                 ?assertEqual(Deep(D), Got),
                 {0, _, <<>>} = cat(Config, [File], 200000);
             false ->
                 ?assertEqual({error, {corrupt, File, 8 + byte_size(H)}, []},
                              tracekit_file:read(File)),
                 {1, <<>>, _} = cat(Config, [File], 200000)
         end
     end || D <- [200, 201, 2500, 100000]],
    %% Through the writer: a fun whose environment nests 300 deep.
    Path = filename:join(Dir, "deep_fun.tkt"),
    {ok, F} = tracekit_file:new(#{path => Path}),
    Env = Deep(300),
    Fun = fun() -> Env end,
    Shallow = Deep(150),
    Near = fun() -> Shallow end,
    ok = tracekit_file:trace(send, F, self(), {Fun, Near}, #{extra => self()}),
    ok = tracekit_file:close(F),
    Me = self(),
    {ok, [{trace, Me, send, {'...', Near}, Me}]} = tracekit_file:read(Path),
    {0, Line, <<>>} = cat(Config, [Path], 200000),
    ?assertMatch({match, _}, re:run(Line, "'\\.\\.\\.'")).

%% ---- an upgrade from another directory -------------------------------------

%% tracekit_file loaded again from another NIF directory (a release
%% upgrade with a new priv path), then the old code purged, while files
%% are written under load on 8 schedulers: the new library took the
%% resource type over, and the old one was unloaded while its writer
%% threads still ran in it (the VM died, status 139). Now each writer
%% holds its library until it has been joined: the old library stays
%% mapped while its writers run and goes once they are joined; the VM
%% lives, every event offered is counted (written, or dropped once the
%% new library refuses the old file's recorder), the file reads back with
%% exactly `written' events, a file dropped without close/1 is ended and
%% joined too, and a file opened after the upgrade works.
upgrade_from_another_directory(Config) ->
    Dir = ?config(priv_dir, Config),
    Src = filename:dirname(tracekit_nif:path(tracekit_file)),
    [A, B] = [filename:join(Dir, N) || N <- ["nifs_a", "nifs_b"]],
    [begin
         ok = filelib:ensure_path(D),
         [{ok, _} = file:copy(So, filename:join(D, filename:basename(So)))
          || So <- filelib:wildcard(filename:join(Src, "*.so"))]
     end || D <- [A, B]],
    Paths = [filename:dirname(code:which(M)) || M <- [tracekit_file, ?MODULE]],
    {ok, Peer, _} = peer:start_link(#{connection => standard_io,
                                      env => [{"TRACEKIT_NIF_DIR", A}],
                                      args => ["+S", "8:8"]
                                          ++ lists:append([["-pa", P] || P <- Paths])}),
    try
        R = peer:call(Peer, ?MODULE, upgrade_on_peer, [Dir, A, B], 120000),
        ct:log("~p", [R]),
        #{offered := Offered, stats := Stats, read := Read, mapped := Mapped,
          dropped_file := DroppedFile, after_upgrade := After} = R,
        #{written := W, dropped := D, buffered := 0, over := 0, overwritten := 0} = Stats,
        ?assertEqual(Offered, W + D),
        ?assert(W > 0),
        ?assertEqual({ok, W}, Read),
        %% The old library: mapped while its writers ran, gone after.
        ?assertEqual({true, false}, Mapped),
        ?assertMatch({ok, N} when N > 0, DroppedFile),
        ?assertMatch({ok, N} when N > 0, After),
        ?assertEqual(4, peer:call(Peer, erlang, '+', [2, 2]))
    after
        peer:stop(Peer)
    end.

%% Whether the library of directory Dir is mapped into this VM.
mapped(Dir) ->
    {ok, Maps} = file:read_file("/proc/self/maps"),
    binary:match(Maps, list_to_binary(filename:join(Dir, "tracekit_file.so"))) =/= nomatch.

upgrade_on_peer(Dir, A, B) ->
    Path = filename:join(Dir, "upgraded.tkt"),
    Dropped = filename:join(Dir, "dropped_at_upgrade.tkt"),
    {module, tracekit_file} = code:ensure_loaded(tracekit_file),
    true = mapped(A),
    {ok, F} = tracekit_file:new(#{path => Path, buffer => 65536}),
    {ok, C} = tracekit_count:new(),
    Self = self(),
    %% A file the upgrade finds open and that is then dropped unclosed.
    Holder = spawn(fun() ->
                           {ok, G} = tracekit_file:new(#{path => Dropped}),
                           ok = tracekit_file:trace(send, G, self(), before, #{}),
                           Self ! {holding, self()},
                           receive drop -> ok end
                   end),
    receive {holding, Holder} -> ok end,
    S1 = trace:session_create(upgrade_file, {tracekit_file, F}, []),
    S2 = trace:session_create(upgrade_count, {tracekit_count, C}, []),
    Ps = [spawn(fun Loop() -> self() ! {x, lists:seq(1, 20)}, receive _ -> ok end, Loop() end)
          || _ <- lists:seq(1, 16)],
    [1 = trace:process(S, P, true, [send]) || P <- Ps, S <- [S1, S2]],
    timer:sleep(300),
    true = os:putenv("TRACEKIT_NIF_DIR", B),
    {module, tracekit_file} = code:load_file(tracekit_file),
    _ = code:purge(tracekit_file), % (true when it killed a process)
    true = mapped(B),
    timer:sleep(300),
    Holder ! drop,
    timer:sleep(300),
    MappedWhileRunning = mapped(A),
    [exit(P, kill) || P <- Ps],
    timer:sleep(100),
    [trace:session_destroy(S) || S <- [S1, S2]],
    ok = tracekit_file:close(F),
    Stats = tracekit_file:stats(F),
    #{send := Offered} = tracekit_count:read(C),
    %% A file made by the new library; its new/1 also joins the dropped
    %% file's writer, which lets the old library go.
    After = filename:join(Dir, "after_upgrade.tkt"),
    {ok, H} = tracekit_file:new(#{path => After}),
    ok = tracekit_file:trace(send, H, self(), later, #{}),
    ok = tracekit_file:close(H),
    Gone = wait_unmapped(A, 100),
    #{offered => Offered, stats => Stats, mapped => {MappedWhileRunning, not Gone},
      read => tracekit_file:fold(fun(_, N) -> N + 1 end, 0, Path),
      dropped_file => tracekit_file:fold(fun(_, N) -> N + 1 end, 0, Dropped),
      after_upgrade => tracekit_file:fold(fun(_, N) -> N + 1 end, 0, After)}.

%% Whether the library of Dir goes within N tries (it is unloaded
%% asynchronously, once its last keeper is released).
wait_unmapped(_, 0) ->
    false;
wait_unmapped(Dir, N) ->
    erlang:garbage_collect(),
    case mapped(Dir) of
        false -> true;
        true -> timer:sleep(50), wait_unmapped(Dir, N - 1)
    end.
