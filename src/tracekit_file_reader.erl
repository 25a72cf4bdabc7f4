%% @private
%% @doc The reading side of {@link tracekit_file}: trace files (FORMAT.md)
%% opened, read chunk by chunk (the framing and its checks are C's, in
%% tracekit_core), and merged in time order.
%%
%% Each file keeps one events chunk in hand at a time, so a set of files of
%% any size is read in the memory of one chunk per file. The merge takes
%% the earliest head among the files (a record's time is its stamp turned
%% into system time by the anchors of its file, FORMAT.md).
-module(tracekit_file_reader).

-export([fold/4, files/1]).

-define(HEADER, 1).
-define(DICT, 2).
-define(EVENTS, 3).
-define(LOST, 4).
-define(END, 5).
%% The numbers of a header that the decoder takes as u64 (FORMAT.md).
-define(U64(X), (is_integer(X) andalso X >= 0 andalso X < 1 bsl 64)).

-record(r, {index :: non_neg_integer(),
            file :: file:filename_all(),
            %% The file, and its dictionary so far (kept in the reader).
            h :: tracekit_core:reader() | closed,
            %% The machine's reference anchor and rate (FORMAT.md, "Time").
            ref = {0, 0, 1000000000} :: {non_neg_integer(), non_neg_integer(),
                                         non_neg_integer()},
            pending = [] :: [{integer(), non_neg_integer(), tuple()}],
            lost = 0 :: non_neg_integer()}).

%% @doc The files a source names: a file, a wrap set's base name (its files
%% Base.0, Base.1, ...), or a list of them.
-spec files(tracekit_file:source()) -> {ok, [file:filename_all()]} | {error, term()}.
files([]) ->
    {ok, []};
files(Source) when is_list(Source), not is_integer(hd(Source)) ->
    lists:foldr(fun(S, {ok, Acc}) ->
                        case files(S) of
                            {ok, Fs} -> {ok, Fs ++ Acc};
                            E -> E
                        end;
                   (_, E) -> E
                end, {ok, []}, Source);
files(Path) when is_binary(Path); is_atom(Path); is_list(Path) ->
    case filelib:is_regular(Path) of
        true ->
            {ok, [Path]};
        false ->
            Set = wrap_set(Path),
            case Set of
                [] -> {error, {no_files, Path}};
                _ -> {ok, Set}
            end
    end;
files(Path) ->
    {error, {no_files, Path}}.

%% Base.N for every N there is. A binary base name gives binary names
%% (as file:list_dir/1 does), compared as bytes: such a name need not be
%% valid in the native encoding.
wrap_set(Base) ->
    B = filename:flatten(Base),
    Dir = filename:dirname(B),
    Name = filename:basename(B),
    case file:list_dir_all(Dir) of
        {ok, Entries} ->
            lists:sort([filename:join(Dir, E1) || E <- Entries,
                                                  E1 <- [entry_as(Name, E)],
                                                  wrap_member(Name, E1)]);
        {error, _} ->
            []
    end.

%% An entry of the directory in the form of the base name.
entry_as(Name, Entry) when is_binary(Name), is_list(Entry) ->
    unicode:characters_to_binary(Entry, unicode, file:native_name_encoding());
entry_as(_, Entry) ->
    Entry.

wrap_member(Name, Entry) when is_binary(Name), is_binary(Entry) ->
    Size = byte_size(Name),
    case Entry of
        <<Name:Size/binary, $., Digits/binary>> -> digits(binary_to_list(Digits));
        _ -> false
    end;
wrap_member(Name, Entry) when is_list(Name), is_list(Entry) ->
    case string:prefix(Entry, Name ++ ".") of
        nomatch -> false;
        Digits -> digits(Digits)
    end;
wrap_member(_, _) ->
    false. % a raw name that a string base cannot match

digits(Digits) ->
    Digits =/= [] andalso lists:all(fun(C) -> C >= $0 andalso C =< $9 end, Digits).

%% Opens every file of a source, and reads each one's header: the files
%% of one machine (its boot id and clock) share one reference anchor and
%% rate, the first file's, so that their stamps order their events.
open(Source, Skip) ->
    maybe
        {ok, Files} ?= files(Source),
        {ok, Readers} ?= open_all(Files, 0, []),
        headers(Readers, Skip, #{}, [], [])
    end.

open_all([], _, Acc) ->
    {ok, lists:reverse(Acc)};
open_all([F | Fs], I, Acc) ->
    case tracekit_core:file_open(name_binary(F)) of
        {ok, H} ->
            open_all(Fs, I + 1, [#r{index = I, file = F, h = H} | Acc]);
        {error, Why} ->
            [tracekit_core:file_close(H) || #r{h = H} <- Acc],
            {error, {file, F, Why}}
    end.

name_binary(F) when is_binary(F) -> F;
name_binary(F) ->
    unicode:characters_to_binary(filename:flatten(F), unicode, file:native_name_encoding()).

headers([], _, _, Acc, Skipped) ->
    {ok, lists:reverse(Acc), Skipped};
headers([#r{h = H, file = F} = R | Rs], Skip, Refs, Acc, Skipped) ->
    case tracekit_core:file_next(H) of
        {?HEADER, Bin, At} ->
            case safe_term(Bin) of
                {ok, #{anchor := {S, T}} = Hd} when ?U64(S), ?U64(T) ->
                    case maps:get(stamp_hz, Hd, 1000000000) of
                        Hz when ?U64(Hz) ->
                            Machine = {maps:get(machine, Hd, F), maps:get(stamp, Hd, unknown)},
                            Ref = maps:get(Machine, Refs, {S, T, Hz}),
                            headers(Rs, Skip, Refs#{Machine => Ref}, [R#r{ref = Ref} | Acc],
                                    Skipped);
                        _ ->
                            no_header(R, Rs, Skip, Refs, Acc, Skipped, At)
                    end;
                _ ->
                    no_header(R, Rs, Skip, Refs, Acc, Skipped, At)
            end;
        {_, _, At} ->
            no_header(R, Rs, Skip, Refs, Acc, Skipped, At);
        {corrupt, At} ->
            no_header(R, Rs, Skip, Refs, Acc, Skipped, At);
        eof ->
            no_header(R, Rs, Skip, Refs, Acc, Skipped, 8)
    end.

%% A file whose header is missing or damaged: an error, or, skipping, its
%% events on its own scale from its next good chunk on.
no_header(#r{h = H, file = F} = R, Rs, true, Refs, Acc, Skipped, At) ->
    Skipped1 = case tracekit_core:file_resync(H) of
                   {ok, To} -> [{F, At, To} | Skipped];
                   eof -> [{F, At, eof} | Skipped]
               end,
    headers(Rs, true, Refs, [R | Acc], Skipped1);
no_header(#r{file = F} = R, Rs, false, _Refs, Acc, _Skipped, At) ->
    [tracekit_core:file_close(H) || #r{h = H} <- [R | Acc ++ Rs]],
    {error, {corrupt, F, At}}.

%% @doc Folds Fun over the events of the readers in time order. With Skip,
%% damaged regions are stepped over and reported at the end.
-spec fold(fun((tuple(), Acc) -> Acc), Acc, tracekit_file:source(), boolean()) ->
          {ok, Acc} | {error, term(), Acc}.
fold(Fun, Acc0, Source, Skip) ->
    case open(Source, Skip) of
        {ok, Readers, Skipped} -> fold(Fun, Acc0, Readers, Skip, Skipped);
        {error, Reason} -> {error, Reason, Acc0}
    end.

fold(Fun, Acc0, Readers, Skip, Skipped00) ->
    try
        {Heads, Skipped0} = lists:foldl(
                              fun(R, {H, S}) ->
                                      {R1, S1} = refill(R, Skip, S, Acc0),
                                      {push(R1, H), S1}
                              end, {gb_sets:empty(), Skipped00}, Readers),
        {Acc, Skipped} = merge(Fun, Acc0, Heads, Skip, Skipped0),
        case Skipped of
            [] -> {ok, Acc};
            _ -> {error, {skipped, lists:reverse(Skipped)}, Acc}
        end
    catch
        throw:{tracekit_file_corrupt, Reason, AccSoFar} ->
            {error, Reason, AccSoFar}
    after
        [tracekit_core:file_close(H) || #r{h = H} <- Readers]
    end.

%% The heads: {Time, Index, Reader}, one per reader with events in hand.
push(#r{pending = []}, Heads) ->
    Heads;
push(#r{pending = [{Time, _, _} | _], index = I} = R, Heads) ->
    gb_sets:add({Time, I, R}, Heads).

merge(Fun, Acc, Heads, Skip, Skipped) ->
    case gb_sets:is_empty(Heads) of
        true ->
            {Acc, Skipped};
        false ->
            {{_, I, #r{pending = Pending} = R}, Heads1} = gb_sets:take_smallest(Heads),
            %% The reader's events before the next reader's head go out
            %% without going through the heads.
            Limit = case gb_sets:is_empty(Heads1) of
                        true -> none;
                        false -> {T2, I2, _} = gb_sets:smallest(Heads1), {T2, I2}
                    end,
            {Acc1, Rest} = run(Fun, Acc, Pending, I, Limit),
            {R1, Skipped1} = case Rest of
                                 [] -> refill(R#r{pending = []}, Skip, Skipped, Acc1);
                                 _ -> {R#r{pending = Rest}, Skipped}
                             end,
            merge(Fun, Acc1, push(R1, Heads1), Skip, Skipped1)
    end.

%% Fun over the events of one reader (index I) that come before Limit
%% ({Time, Index} of the next reader's head, or none); at least one.
run(Fun, Acc, [{_, _, E} | Rest], I, Limit) ->
    run1(Fun, Fun(E, Acc), Rest, I, Limit).

run1(Fun, Acc, [{T, _, E} | Rest], I, Limit) when Limit =:= none; {T, I} < Limit ->
    run1(Fun, Fun(E, Acc), Rest, I, Limit);
run1(_Fun, Acc, Rest, _I, _Limit) ->
    {Acc, Rest}.

%% Reads chunks until the reader has events in hand, or none are left. Acc
%% is what the fold has so far (for an error).
refill(#r{h = closed} = R, _, Skipped, _) ->
    {R, Skipped};
refill(#r{h = H, file = F} = R, Skip, Skipped, Acc) ->
    case tracekit_core:file_next(H) of
        {Type, Bin, At} ->
            case chunk(Type, Bin, R) of
                {ok, #r{pending = []} = R1} ->
                    refill(R1, Skip, Skipped, Acc);
                {ok, R1} ->
                    {R1, Skipped};
                error when Skip ->
                    %% It checked out but makes no sense: step over it.
                    refill(R, Skip, [{F, At, At + 16 + byte_size(Bin)} | Skipped], Acc);
                error ->
                    throw({tracekit_file_corrupt, {corrupt, F, At}, Acc})
            end;
        eof ->
            tracekit_core:file_close(H),
            {R#r{h = closed}, Skipped};
        {corrupt, At} when Skip ->
            case tracekit_core:file_resync(H) of
                {ok, To} ->
                    refill(R, Skip, [{F, At, To} | Skipped], Acc);
                eof ->
                    tracekit_core:file_close(H),
                    {R#r{h = closed}, [{F, At, eof} | Skipped]}
            end;
        {corrupt, At} ->
            throw({tracekit_file_corrupt, {corrupt, F, At}, Acc})
    end.

%% One chunk into the reader's state: {ok, R} or error (malformed).
chunk(?HEADER, _Bin, _R) ->
    error; % only a file's first chunk is a header
chunk(?DICT, Bin, #r{h = H} = R) ->
    %% Appended in place: the time to read a file is linear in its
    %% dictionary, however many chunks it comes in.
    case tracekit_core:file_dict(H, Bin) of
        ok -> {ok, R};
        _ -> error % malformed, or not numbered after the entries so far
    end;
chunk(?EVENTS, Bin, #r{h = H, ref = Ref} = R) ->
    case tracekit_core:file_events(H, Bin, Ref) of
        {Events, 0} when is_list(Events) -> {ok, R#r{pending = Events}};
        _ -> error % a bad chunk, or records that do not decode
    end;
chunk(?LOST, <<N:64/little, _Stamp:64/little>>, #r{lost = L} = R) ->
    {ok, R#r{lost = L + N}};
chunk(?END, _Bin, R) ->
    {ok, R};
chunk(Type, _Bin, R) when is_integer(Type), Type > ?END ->
    {ok, R}; % a chunk type of a later version: readers step over it
chunk(_, _, _) ->
    error.

safe_term(Bin) ->
    try {ok, binary_to_term(Bin)}
    catch error:badarg -> error
    end.
