import os
from datetime import datetime, timedelta

from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy import Column, Integer, String, create_engine
from sqlalchemy.orm import Session, declarative_base, sessionmaker

engine = create_engine(f"sqlite:///{os.environ.get('DATABASE_PATH', 'time.db')}")
SessionLocal = sessionmaker(bind=engine)
Base = declarative_base()


class Zone(Base):
    __tablename__ = "timezones"
    name = Column(String, primary_key=True)
    utc_offset_minutes = Column(Integer, nullable=False)
    is_dst = Column(Integer, nullable=False)


app = FastAPI(title="Time twin")


def get_db():
    db = SessionLocal()
    try:
        yield db
    finally:
        db.close()


class CurrentTimeIn(BaseModel):
    timezone: str


class ConvertIn(BaseModel):
    source_timezone: str
    time: str
    target_timezone: str


def zone(db: Session, name: str) -> Zone:
    found = db.query(Zone).filter(Zone.name == name).first()
    if found is None:
        raise HTTPException(status_code=400, detail=f"Invalid timezone: {name}")
    return found


def stamp(moment: datetime, z: Zone) -> str:
    sign = "+" if z.utc_offset_minutes >= 0 else "-"
    hours, minutes = divmod(abs(z.utc_offset_minutes), 60)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{hours:02d}:{minutes:02d}"


@app.post("/tools/get_current_time", operation_id="get_current_time", summary="Get current time in a timezone")
def get_current_time(body: CurrentTimeIn, db: Session = Depends(get_db)):
    z = zone(db, body.timezone)
    local = datetime.utcnow() + timedelta(minutes=z.utc_offset_minutes)
    return {"timezone": z.name, "datetime": stamp(local, z), "is_dst": bool(z.is_dst)}


@app.post("/tools/convert_time", operation_id="convert_time", summary="Convert time between timezones")
def convert_time(body: ConvertIn, db: Session = Depends(get_db)):
    source, target = zone(db, body.source_timezone), zone(db, body.target_timezone)
    try:
        hour, minute = (int(p) for p in body.time.split(":"))
    except ValueError:
        raise HTTPException(status_code=400, detail="Invalid time format. Expected HH:MM [24-hour format]")
    day = datetime.utcnow().replace(hour=hour, minute=minute, second=0, microsecond=0)
    moved = day + timedelta(minutes=target.utc_offset_minutes - source.utc_offset_minutes)
    difference = (target.utc_offset_minutes - source.utc_offset_minutes) / 60
    return {"source": {"timezone": source.name, "datetime": stamp(day, source), "is_dst": bool(source.is_dst)},
            "target": {"timezone": target.name, "datetime": stamp(moved, target), "is_dst": bool(target.is_dst)},
            "time_difference": f"{difference:+.1f}h"}
