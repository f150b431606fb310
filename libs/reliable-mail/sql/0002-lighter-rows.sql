-- reliable-mail schema version 2: lighter-rows
begin;
alter table reliable_mail.mail_outbox alter column "content_hash" drop not null;
alter table reliable_mail.mail_outbox drop constraint "mail_outbox_message_id_unique";
do $$
      begin
        if current_setting('server_version_num')::int >= 140000 then
          execute 'alter table reliable_mail.mail_outbox alter column "payload" set compression lz4';
        end if;
      exception when others then
        raise notice 'reliable-mail: lz4 is not available, the outbox payload stays compressed with pglz';
      end $$;
insert into reliable_mail.mail_migrations ("version", "name", "serves_code_from")
   select 2, 'lighter-rows', greatest(1, coalesce(max("serves_code_from"), 1))
   from reliable_mail.mail_migrations;
commit;
