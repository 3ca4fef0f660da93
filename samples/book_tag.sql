-- The TAG-system example of the source documents (samples/README.md): books and their tags, a
-- many-to-many relation kept in a join table.
--
--   mysql> select * from book;                mysql> select * from tag;
--   | id | name                          | author         |    | tagname | book_id |
--   |  1 | The Ruby Programming Language | Mark Pilgrim   |    | ruby    |       1 |
--   |  2 | Ruby on rail                  | David Flanagan |    | ruby    |       2 |
--   |  3 | Programming Erlang            | Joe Armstrong  |    | web     |       2 |
--                                                             | erlang  |       3 |
--
-- The document prints id 1 on all three books, a typo: its Redis half writes book:1, book:2
-- and book:3, and the tag rows point at books 1, 2 and 3. Titles and authors are kept as the
-- document has them. In Redis (mappings/book_tag.yaml) each tag becomes a SET of book ids:
--   SINTER tag:web tag:ruby -> {2}     (ruby and web)
--   SDIFF  tag:ruby tag:web -> {1}     (ruby but not web)
--
-- Creates its tables in the current database (MySQL 8 and MariaDB).

DROP TABLE IF EXISTS tag;
DROP TABLE IF EXISTS book;

CREATE TABLE book (
    id     INT          NOT NULL,
    name   VARCHAR(128) NOT NULL,
    author VARCHAR(64)  NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE tag (
    tagname VARCHAR(32) NOT NULL,
    book_id INT         NOT NULL,
    PRIMARY KEY (tagname, book_id),
    KEY idx_tag_book_id (book_id),
    CONSTRAINT fk_tag_book FOREIGN KEY (book_id) REFERENCES book (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

INSERT INTO book (id, name, author) VALUES
    (1, 'The Ruby Programming Language', 'Mark Pilgrim'),
    (2, 'Ruby on rail',                  'David Flanagan'),
    (3, 'Programming Erlang',            'Joe Armstrong');

INSERT INTO tag (tagname, book_id) VALUES
    ('ruby',   1),
    ('ruby',   2),
    ('web',    2),
    ('erlang', 3);
