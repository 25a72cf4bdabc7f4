%% @doc A tracer module that streams events to disk: a trace file, or a
%% wrap set of files reused in turn, with exact accounting of what it could
%% not keep, and the readers that give the events back.
%%
%% ```
%% 1> {ok, F} = tracekit_file:new(#{path => "/tmp/calls.tkt"}).
%% 2> S = trace:session_create(disk, {tracekit_file, F}, []).
%% 3> trace:process(S, whereis(my_server), true, [send, 'receive', timestamp]).
%% 4> tracekit_file:close(F).
%% ok
%% 5> tracekit_file:read("/tmp/calls.tkt").
%% {ok,[{trace_ts,<0.90.0>,'receive',{'$gen_call',...},{1732,281234,123456}}, ...]}
%% '''
%%
%% Why: a ring keeps only what fits, and draining it builds every event on
%% a heap. A file tracer keeps a trace of minutes or hours, of a node under
%% load, to be read later and elsewhere. The traced processes only write
%% into per-thread rings, as with {@link tracekit_ring}; a thread of the
%% file's own (never a scheduler) moves the records to disk in large
%% writes, without building terms. A disk that cannot keep up fills the
%% rings, and events are then refused before the VM builds them, and
%% counted: schedulers never wait for the disk, and memory does not grow.
%%
%% The file is the tracer state wherever OTP takes a tracer module:
%% `trace:session_create(Name, {tracekit_file, File}, [])',
%% `erlang:trace(Pids, true, [{tracer, tracekit_file, File} | Flags])' or
%% `seq_trace:set_system_tracer({tracekit_file, File})'.
%%
%% The format is in FORMAT.md: a file needs nothing from the node that
%% wrote it to be read (by {@link read/1} here, or by `tracekit-cat').
-module(tracekit_file).

-export([new/1, stats/1, flush/1, close/1, set/2, private_dir/2]).
-export([fold/3, fold/4, read/1, format/1, format/2]).
%% The NIFs of reading, for tracekit_file_reader.
-export([reader_open/1, reader_next/1, reader_resync/1, reader_close/1,
         reader_dict/2, reader_events/3]).

-on_load(init/0).

-nifs([new_nif/2, stats/1, flush/1, close/1, set_nif/4, private_dir_nif/2,
       reader_open/1, reader_next/1, reader_resync/1, reader_close/1,
       reader_dict/2, reader_events/3]).

-define(DEFAULT_BUFFER, 1 bsl 20).
%% The largest rate limit: its window keeps one stamp per event
%% (TK_LIMIT_RATE_MAX), over at most a day (TK_FILE_RATE_MS_MAX).
-define(RATE_N_MAX, 1000000).
-define(RATE_MS_MAX, 86400000).

-opaque file() :: reference().
-opaque reader() :: reference().
-type path() :: file:name_all().
-type source() :: path() | [path()].
-type options() :: #{path := path(),
                     wrap => {pos_integer(), pos_integer()},
                     max_bytes => pos_integer() | infinity,
                     buffer => pos_integer(),
                     payload => full | none | {max_bytes, pos_integer()},
                     tags => [atom()],
                     max_events => pos_integer() | infinity,
                     rate => none | {pos_integer(), pos_integer()},
                     mode => mode()}.
%% Permission bits: owner read and write, and any of group and others'
%% read and write (8#600 .. 8#666).
-type mode() :: 8#600..8#666.
-type stats() :: #{written := non_neg_integer(),
                   dropped := non_neg_integer(),
                   bytes := non_neg_integer(),
                   files := non_neg_integer(),
                   write_errors := non_neg_integer(),
                   last_error := none | atom(),
                   buffered := non_neg_integer(),
                   filtered := non_neg_integer(),
                   truncated := non_neg_integer(),
                   producers := non_neg_integer(),
                   size := pos_integer(),
                   closed := boolean(),
                   paused := boolean(),
                   sample := pos_integer(),
                   tags := all | [atom()],
                   path := binary(),
                   over := non_neg_integer(),
                   overwritten := non_neg_integer(),
                   limit := none | tracekit_limits:reason()}.
-type read_error() :: {corrupt, file:filename_all(), non_neg_integer()}
                    | {skipped, [{file:filename_all(), non_neg_integer(),
                                  non_neg_integer() | eof}]}
                    | {file, path(), file:posix() | not_a_trace}
                    | {no_files, path()}.
-export_type([file/0, options/0, stats/0, source/0, read_error/0, reader/0]).

-include("tracer_callbacks.hrl").

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

%%% ---- writing --------------------------------------------------------------

%% @doc Opens a trace file for writing. Options:
%% <dl>
%% <dt>`path'</dt><dd>(required) the file; with `wrap', the base name of
%%   the set: files `Path.0', `Path.1', ...</dd>
%% <dt>`wrap'</dt><dd>`{BytesPerFile, Count}': a set of Count files of
%%   about BytesPerFile bytes each (at least 4096), reused in turn, like
%%   dbg's wrap files: the newest Count files are kept.</dd>
%% <dt>`max_bytes'</dt><dd>stop writing when the files hold this many
%%   bytes in all (at least 4096); what follows is counted as dropped
%%   (default `infinity'). The file still ends with its end chunk.</dd>
%% <dt>`buffer'</dt><dd>bytes of each producer thread's ring (default 1
%%   MiB; as `size' in {@link tracekit_ring:new/1}).</dd>
%% <dt>`payload', `tags'</dt><dd>as in {@link tracekit_ring:new/1}.</dd>
%% <dt>`max_events'</dt><dd>write at most this many events (default
%%   `infinity').</dd>
%% <dt>`rate'</dt><dd>`{N, Milliseconds}': stop writing at the first event
%%   that would make more than N within that time (default `none'; N at
%%   most 1,000,000, the time at most a day).</dd>
%% <dt>`mode'</dt><dd>the files' permission bits (default `8#600': the
%%   owner's alone): owner read and write, and any of read and write for
%%   group and others (`8#640', `8#644', `8#666', ...); never execute or
%%   special bits.</dd>
%% </dl>
%% Each file is made new (never written through a symbolic link, never
%% into a file someone else made), with exactly those bits: trace files
%% hold message contents. An earlier trace file of the same user at the
%% path is replaced; anything else there is left alone and refused
%% (`{error, {file, Path, eexist}}'). Make files in a directory of your
%% own ({@link private_dir/2}) on a machine others use.
%% The limits are those of {@link tracekit:calls/2}, applied by the writer
%% to the events in time order (by the stamps of the records): the file
%% ends at the event a printed trace would end at. Events after it are
%% counted as `over' in {@link stats/1}, which also says which `limit' was
%% reached.
%% A bad option gives `{error, {badopt, Option}}'; a path that cannot be
%% created (a missing directory, no permission) `{error, {file, Path,
%% Posix}}', before anything is traced.
-spec new(options() | [{atom(), term()}]) ->
          {ok, file()} | {error, {badopt, term()} | {file, path(), atom()}}.
new(Opts) when is_list(Opts) ->
    try maps:from_list(Opts) of
        Map -> new(Map)
    catch
        error:_ -> {error, {badopt, Opts}}
    end;
new(#{path := Path} = Opts) ->
    Defaults = #{wrap => none, max_bytes => infinity, buffer => ?DEFAULT_BUFFER,
                 payload => full, tags => all, max_events => infinity, rate => none,
                 mode => 8#600},
    case check(maps:to_list(maps:remove(path, Opts)), Defaults) of
        {ok, O} ->
            case path_binary(Path) of
                {ok, Bin} -> open(Path, Bin, O);
                error -> {error, {badopt, {path, Path}}}
            end;
        {error, _} = E ->
            E
    end;
new(Opts) when is_map(Opts) ->
    {error, {badopt, {path, missing}}};
new(Opts) ->
    {error, {badopt, Opts}}.

open(Path, Bin, #{wrap := Wrap, max_bytes := MaxBytes, buffer := Size,
                  payload := Payload, tags := Tags, max_events := MaxEvents,
                  rate := Rate, mode := Mode}) ->
    {PayloadMode, PayloadMax} = case Payload of
                                    {max_bytes, N} -> {max_bytes, N};
                                    Other -> {Other, 0}
                                end,
    Opts = #{wrap => case Wrap of none -> {0, 0}; _ -> Wrap end,
             max_bytes => case MaxBytes of infinity -> 0; _ -> MaxBytes end,
             buffer => Size, payload => PayloadMode, payload_max => PayloadMax,
             tags => case Tags of all -> true; L -> L end,
             meta => {node(), erlang:system_info(otp_release), version()},
             max_events => case MaxEvents of infinity -> 0; _ -> MaxEvents end,
             rate => case Rate of none -> {0, 0}; _ -> Rate end,
             mode => Mode},
    case new_nif(Bin, Opts) of
        {ok, _} = Ok -> Ok;
        {error, Posix} -> {error, {file, Path, Posix}}
    end.

version() ->
    case application:get_key(tracekit, vsn) of
        {ok, V} -> V;
        undefined -> "unknown"
    end.

check([], Acc) ->
    {ok, Acc};
check([{wrap, {Bytes, Count}} = O | T], Acc) ->
    case is_integer(Bytes) andalso Bytes >= 4096 andalso is_integer(Count)
        andalso Count >= 1 andalso Count =< 1000000 of
        true -> check(T, Acc#{wrap := {Bytes, Count}});
        false -> {error, {badopt, O}}
    end;
check([{max_bytes, M} = O | T], Acc) ->
    case M =:= infinity orelse (is_integer(M) andalso M >= 4096 andalso M < 1 bsl 64) of
        true -> check(T, Acc#{max_bytes := M});
        false -> {error, {badopt, O}}
    end;
check([{max_events, M} = O | T], Acc) ->
    case M =:= infinity orelse (is_integer(M) andalso M > 0 andalso M < 1 bsl 64) of
        true -> check(T, Acc#{max_events := M});
        false -> {error, {badopt, O}}
    end;
check([{rate, R} = O | T], Acc) ->
    case R of
        none -> check(T, Acc#{rate := none});
        {N, Ms} when is_integer(N), N > 0, N =< ?RATE_N_MAX,
                     is_integer(Ms), Ms > 0, Ms =< ?RATE_MS_MAX ->
            check(T, Acc#{rate := R});
        _ -> {error, {badopt, O}}
    end;
check([{mode, M} = O | T], Acc) ->
    case is_integer(M) andalso M band bnot 8#666 =:= 0 andalso M band 8#600 =:= 8#600 of
        true -> check(T, Acc#{mode := M});
        false -> {error, {badopt, O}}
    end;
check([{buffer, B} = O | T], Acc) ->
    ring_option(size, B, O, buffer, T, Acc);
check([{payload, P} = O | T], Acc) ->
    ring_option(payload, P, O, payload, T, Acc);
check([{tags, Tags} = O | T], Acc) ->
    ring_option(tags, Tags, O, tags, T, Acc);
check([O | _], _) ->
    {error, {badopt, O}}.

%% The options the recorder shares with tracekit_ring are checked there.
ring_option(RingKey, V, O, Key, T, Acc) ->
    case tracekit_ring:check_option(RingKey, V) of
        ok when Key =:= tags -> check(T, Acc#{Key := lists:usort(V)});
        ok -> check(T, Acc#{Key := V});
        {error, _} -> {error, {badopt, O}}
    end.

path_binary(Path) ->
    case name_binary(Path) of
        {ok, Bin} when Bin =/= <<>> -> {ok, Bin};
        _ -> error
    end.

new_nif(_Path, _Opts) ->
    erlang:nif_error(not_loaded).

%% @doc Makes a directory of the caller's own for trace files: in
%% `Parent', named `Prefix' followed by 12 characters from the kernel's
%% random source, made new (a name that was taken is never used) with
%% permission bits exactly 8#700. Returns its path (a binary when `Parent'
%% is one, else a string), or `{error, Posix}': `enotdir' when `Parent' is
%% not a directory, `enoent' when it does not exist, `einval' when
%% `Prefix' holds a `/'.
-spec private_dir(file:name_all(), file:name_all()) ->
          {ok, file:filename_all()} | {error, file:posix() | einval}.
private_dir(Parent, Prefix) ->
    case {name_binary(Parent), name_binary(Prefix)} of
        {{ok, P}, {ok, X}} when P =/= <<>> ->
            case private_dir_nif(P, X) of
                {ok, Dir} when is_binary(Parent) -> {ok, Dir};
                {ok, Dir} -> {ok, unicode:characters_to_list(Dir, file:native_name_encoding())};
                {error, _} = E -> E
            end;
        _ ->
            {error, einval}
    end.

private_dir_nif(_Parent, _Prefix) ->
    erlang:nif_error(not_loaded).

%% A file name as the bytes the OS takes.
name_binary(Name) when is_binary(Name) ->
    {ok, Name};
name_binary(Name) when is_list(Name); is_atom(Name) ->
    try unicode:characters_to_binary(filename:flatten(Name), unicode,
                                     file:native_name_encoding()) of
        Bin when is_binary(Bin) -> {ok, Bin};
        _ -> error
    catch
        error:_ -> error
    end;
name_binary(_) ->
    error.

%% @doc Counters of the file. `written' events are in the files;
%% `overwritten' were written to a file of a wrap set that wrapping has
%% reused since; `dropped' were offered but never written (a full buffer,
%% the size limit, a failed write); `over' came after the `limit' reached
%% (`none', `{max_events, N}' or `{rate, {N, Ms}}') and are left out on
%% purpose; `buffered' wait to be written. Their sum is every event the
%% VM offered. `bytes' written in all, `files' opened (a wrap set reuses
%% them), `write_errors' and `last_error' (a POSIX name), `filtered',
%% `truncated', `producers' and the settings as in {@link
%% tracekit_ring:stats/1}.
-spec stats(file()) -> stats().
stats(_File) ->
    erlang:nif_error(not_loaded).

%% @doc Returns once every event recorded before the call is in the file
%% and synced to the device.
-spec flush(file()) -> ok.
flush(_File) ->
    erlang:nif_error(not_loaded).

%% @doc Stops recording, writes what was recorded, ends the file and
%% closes it. The tracer removes itself from each tracee the next time the
%% VM asks it. Returns also when the disk is full (see {@link stats/1}).
-spec close(file()) -> ok.
close(_File) ->
    erlang:nif_error(not_loaded).

%% @doc Changes what the file records, while tracing runs: as {@link
%% tracekit_ring:set/2}.
-spec set(file(), tracekit_ring:config()) -> ok | {error, {badopt, term()}}.
set(File, Config) ->
    case tracekit_ring:check_config(Config) of
        {ok, {Paused, Tags, Sample}} -> set_nif(File, Paused, Tags, Sample);
        {error, _} = E -> E
    end.

set_nif(_File, _Paused, _Tags, _Sample) ->
    erlang:nif_error(not_loaded).

%%% ---- reading ----------------------------------------------------------------

%% @equiv fold(Fun, Acc, Source, #{})
-spec fold(fun((tracekit_ring:event(), Acc) -> Acc), Acc, source()) ->
          {ok, Acc} | {error, read_error(), Acc}.
fold(Fun, Acc, Source) ->
    fold(Fun, Acc, Source, #{}).

%% @doc Folds over the events of trace files, in time order across files
%% and nodes: each event is the term OTP's process tracer would have sent
%% for it. `Source' is a file, a wrap set's base name, or a list of them
%% (the files of several nodes). A file damaged or cut short gives the
%% events before the damage and `{error, {corrupt, File, Offset}, Acc}':
%% a file is complete only when it ends with its end chunk (FORMAT.md), so
%% that a file whose writer was killed, whose disk was full when it closed,
%% or that is still being written, says so (with `Offset' where it ends).
%% With `#{damaged => skip}' reading goes on at the next good chunk, and
%% the result is `{error, {skipped, Regions}, Acc}' with every event that
%% could be read; `Regions' are `{File, From, To | eof}'.
-spec fold(fun((tracekit_ring:event(), Acc) -> Acc), Acc, source(),
           #{damaged => stop | skip}) ->
          {ok, Acc} | {error, read_error(), Acc}.
fold(Fun, Acc0, Source, Opts) when is_function(Fun, 2), is_map(Opts) ->
    tracekit_file_reader:fold(Fun, Acc0, Source, maps:get(damaged, Opts, stop) =:= skip).

%% @doc Every event of `Source' (see {@link fold/4}), in time order.
-spec read(source()) -> {ok, [tracekit_ring:event()]}
                            | {error, read_error(), [tracekit_ring:event()]}.
read(Source) ->
    case fold(fun(E, Acc) -> [E | Acc] end, [], Source) of
        {ok, Es} -> {ok, lists:reverse(Es)};
        {error, Reason, Es} -> {error, Reason, lists:reverse(Es)}
    end.

%% @equiv format(Source, #{})
-spec format(source()) -> {ok, non_neg_integer()}
                              | {error, read_error(), non_neg_integer()}.
format(Source) ->
    format(Source, #{}).

%% @doc Prints the events of `Source' in the shell's one-line format (as
%% {@link tracekit} prints them), to `io' (default: the group leader);
%% `depth' and `line_length' as in tracekit, `damaged' as in {@link
%% fold/4}. Returns how many were printed.
-spec format(source(), #{io => io:device(), depth => pos_integer(),
                         line_length => pos_integer(), damaged => stop | skip}) ->
          {ok, non_neg_integer()} | {error, read_error(), non_neg_integer()}.
format(Source, Opts) when is_map(Opts) ->
    Io = maps:get(io, Opts, group_leader()),
    FOpts = maps:with([depth, line_length], Opts),
    Print = fun(E, {N, Names}) ->
                    Names1 = registered(E, Names),
                    io:put_chars(Io, [tracekit_format:event(E, FOpts#{names => Names1}), $\n]),
                    {N + 1, Names1}
            end,
    case fold(Print, {0, #{}}, Source, maps:with([damaged], Opts)) of
        {ok, {N, _}} -> {ok, N};
        {error, Reason, {N, _}} -> {error, Reason, N}
    end.

%% The names processes registered in the trace itself (the node that wrote
%% it may be gone, or another).
registered({_, P, register, Name}, Names) -> Names#{P => Name};
registered({_, P, register, Name, _}, Names) -> Names#{P => Name};
registered(_, Names) -> Names.


%%% ---- the NIFs of reading (tracekit_file_reader's) ------------------------------
%%% Trace files (FORMAT.md) read chunk by chunk: the framing and its checks
%%% are C's (c_src/nif/tracekit_file/reader.c); tracekit_file_reader opens
%%% the files of a source and merges their events.

%% @private
%% @doc Opens a trace file for reading (its magic is checked): `{error,
%% cut}' for one cut before its magic was whole.
-spec reader_open(binary()) -> {ok, reader()} | {error, atom()}.
reader_open(_Path) ->
    erlang:nif_error(not_loaded).

%% @private
%% @doc The next chunk whose framing and CRC checked out, by kind:
%% `{Kind, Payload, Offset, Next}' (Next: where the chunk after it
%% starts), a lost chunk `{lost, Count, Offset, Next}', a chunk of a type
%% of a later version `later', one of no type or a lost chunk that is not
%% one `bad_chunk'; `{eof, Offset}' at the end (where the file ends);
%% `{corrupt, Offset}' at a chunk that is damaged or cut short (nothing is
%% consumed). (The chunk types and layouts are the C side's, tk_tfile.h.)
-spec reader_next(reader()) ->
          {header | dict | events | 'end' | later | bad_chunk, binary(),
           non_neg_integer(), non_neg_integer()}
              | {lost, non_neg_integer(), non_neg_integer(), non_neg_integer()}
              | {eof, non_neg_integer()}
              | {corrupt, non_neg_integer()}.
reader_next(_Reader) ->
    erlang:nif_error(not_loaded).

%% @private
%% @doc After `{corrupt, _}': moves to the next chunk that checks out.
-spec reader_resync(reader()) -> {ok, non_neg_integer()} | eof.
reader_resync(_Reader) ->
    erlang:nif_error(not_loaded).

%% @private
%% @doc Closes the file (also done when the reader is garbage collected).
-spec reader_close(reader()) -> ok.
reader_close(_Reader) ->
    erlang:nif_error(not_loaded).

%% @private
%% @doc Appends the entries of a dictionary chunk's payload to the
%% reader's dictionary, all or none: `{error, bad_chunk}' when the chunk
%% is malformed, an entry does not decode, or its first number does not
%% follow the entries so far. The reader keeps the dictionary, so that
%% appending costs time in the chunk's entries only.
-spec reader_dict(reader(), binary()) -> ok | {error, bad_chunk | closed}.
reader_dict(_Reader, _Payload) ->
    erlang:nif_error(not_loaded).

%% @private
%% @doc The events of an events chunk's payload, decoded with the reader's
%% dictionary so far, given its machine's reference
%% `{Stamp, SystemNs, StampsPerSecond}': `{[{TimeNs, Stamp, Event}],
%% Undecodable}'. Times of one machine keep the order of its stamps.
-spec reader_events(reader(), binary(),
                    {non_neg_integer(), non_neg_integer(), non_neg_integer()}) ->
          {[{integer(), non_neg_integer(), tuple()}], non_neg_integer()}
              | {error, bad_chunk}.
reader_events(_Reader, _Payload, _Anchor) ->
    erlang:nif_error(not_loaded).
