-- reliable-mail schema version 7: compressed-payloads
begin;
do $$
    begin
      if exists (
        select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any(enumvals)
      ) then
        -- In EXECUTE: PostgreSQL 13 would refuse the syntax itself.
        execute 'alter table reliable_mail.mail_outbox alter column "payload" set compression lz4, alter column "metadata" set compression lz4';
      end if;
    end $$;
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 7, 'compressed-payloads', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
